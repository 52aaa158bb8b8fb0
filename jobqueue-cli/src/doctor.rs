//! `jobqueue doctor`: the checks of [`jobqueue_core::doctor`], one line
//! each (or JSON), and an exit code for health checks and CI: 0 when no
//! check fails (warnings included), 1 when one does.

use std::time::Duration;

use jobqueue_core::human::parse_duration;
use jobqueue_core::{Check, CheckStatus, DoctorOptions};

use crate::CliError;
use crate::output::{json_document, outln};

/// `jobqueue doctor`. The defaults are [`DoctorOptions::default`]'s.
#[derive(Debug, clap::Args)]
pub(crate) struct DoctorArgs {
    /// Warn when a transaction (or a prepared transaction) has been open
    /// this long: numbers each with a unit (ms, s, m, h, d), e.g. 30s, 5m, 1h30m.
    #[arg(long, value_name = "DURATION", default_value = "5m",
          value_parser = parse_duration, allow_hyphen_values = true)]
    xact_warn: Duration,
    /// Fail when a transaction (or a prepared transaction) has been open
    /// this long.
    #[arg(long, value_name = "DURATION", default_value = "1h",
          value_parser = parse_duration, allow_hyphen_values = true)]
    xact_fail: Duration,
    /// Warn when a replication slot holds back a horizon this many
    /// transactions old (an inactive one that holds any warns).
    #[arg(long, value_name = "XIDS", default_value_t = 1_000_000)]
    slot_warn_xids: u64,
    /// Fail when a replication slot holds back a horizon this many
    /// transactions old.
    #[arg(long, value_name = "XIDS", default_value_t = 10_000_000)]
    slot_fail_xids: u64,
    /// Warn when this share of the jobs table's row versions is dead.
    #[arg(long, value_name = "PERCENT", default_value = "20%", value_parser = parse_percent,
          allow_hyphen_values = true)]
    dead_warn: f64,
    /// Fail when this share of the jobs table's row versions is dead.
    #[arg(long, value_name = "PERCENT", default_value = "50%", value_parser = parse_percent,
          allow_hyphen_values = true)]
    dead_fail: f64,
    /// Fewer dead row versions than this never warn.
    #[arg(long, value_name = "ROWS", default_value_t = 10_000)]
    dead_min: u64,
    /// Warn when the fetch index (1 MB or more) is this many times the
    /// size it would have packed.
    #[arg(long, value_name = "FACTOR", default_value = "10", value_parser = parse_factor,
          allow_hyphen_values = true)]
    index_bloat_warn: f64,
    /// Warn when the LISTEN/NOTIFY queue is this full.
    #[arg(long, value_name = "PERCENT", default_value = "1%", value_parser = parse_percent,
          allow_hyphen_values = true)]
    notify_warn: f64,
    /// Fail when the LISTEN/NOTIFY queue is this full.
    #[arg(long, value_name = "PERCENT", default_value = "50%", value_parser = parse_percent,
          allow_hyphen_values = true)]
    notify_fail: f64,
    /// Warn when this share of the connections open to non-superusers is
    /// in use.
    #[arg(long, value_name = "PERCENT", default_value = "80%", value_parser = parse_percent,
          allow_hyphen_values = true)]
    connections_warn: f64,
    /// Fail when this share of the connections open to non-superusers is
    /// in use.
    #[arg(long, value_name = "PERCENT", default_value = "95%", value_parser = parse_percent,
          allow_hyphen_values = true)]
    connections_fail: f64,
    /// Warn when a live runner's maintenance has not finished a pass for
    /// this long.
    #[arg(long, value_name = "DURATION", default_value = "1m",
          value_parser = parse_duration, allow_hyphen_values = true)]
    maintenance_warn: Duration,
    /// Fail when a live runner's maintenance has not finished a pass for
    /// this long.
    #[arg(long, value_name = "DURATION", default_value = "10m",
          value_parser = parse_duration, allow_hyphen_values = true)]
    maintenance_fail: Duration,
    /// Print the checks as JSON: {"status": ..., "checks": [{"name",
    /// "status", "evidence", "advice"}, ...]}.
    #[arg(long)]
    json: bool,
}

impl DoctorArgs {
    fn options(&self) -> DoctorOptions {
        let mut options = DoctorOptions::default();
        options.xact_warn = self.xact_warn;
        options.xact_fail = self.xact_fail;
        options.slot_warn_xids = self.slot_warn_xids;
        options.slot_fail_xids = self.slot_fail_xids;
        options.dead_warn = self.dead_warn;
        options.dead_fail = self.dead_fail;
        options.dead_min = self.dead_min;
        options.index_bloat_warn = self.index_bloat_warn;
        options.notify_warn = self.notify_warn;
        options.notify_fail = self.notify_fail;
        options.connections_warn = self.connections_warn;
        options.connections_fail = self.connections_fail;
        options.maintenance_warn = self.maintenance_warn;
        options.maintenance_fail = self.maintenance_fail;
        options
    }
}

/// Runs the checks on the database at `url` and prints them; an error
/// (exit code 1) names the checks that failed.
pub(crate) fn run(url: &str, args: DoctorArgs) -> Result<(), CliError> {
    let options = args.options();
    // Thresholds that contradict each other are a wrong command line (2),
    // refused before connecting.
    options.validate()?;
    let mut conn = crate::connect::connect(url)?;
    let checks = jobqueue_core::doctor(&mut conn, &options)?;
    let worst = checks
        .iter()
        .map(|check| check.status)
        .max()
        .unwrap_or(CheckStatus::Ok);
    // The checks ran whatever becomes of the output: a failed one keeps
    // its exit code even when the reader went away before the end.
    let printed = if args.json {
        /// The JSON printed: the worst status, then every check.
        #[derive(serde::Serialize)]
        struct Report<'a> {
            status: CheckStatus,
            checks: &'a [Check],
        }
        json_document(&Report {
            status: worst,
            checks: &checks,
        })
    } else {
        print_checks(&checks)
    };
    let failed: Vec<&str> = checks
        .iter()
        .filter(|check| check.status == CheckStatus::Fail)
        .map(|check| check.name)
        .collect();
    if failed.is_empty() {
        printed
    } else {
        Err(CliError::Refused(format!(
            "{} of {} checks failed: {}",
            failed.len(),
            checks.len(),
            failed.join(", ")
        )))
    }
}

/// One line per check, then the count of each status.
fn print_checks(checks: &[Check]) -> Result<(), CliError> {
    for check in checks {
        print_check(check)?;
    }
    let count = |status| checks.iter().filter(|c| c.status == status).count();
    outln!(
        "{} checks: {} ok, {} warn, {} fail",
        checks.len(),
        count(CheckStatus::Ok),
        count(CheckStatus::Warn),
        count(CheckStatus::Fail)
    )
}

/// `ok    vacuum horizon    oldest transaction 200ms (pid 123, psql)`,
/// then for a warning or a failure `      -> what to do`.
fn print_check(check: &Check) -> Result<(), CliError> {
    outln!(
        "{:<6}{:<19}{}",
        check.status.as_str(),
        check.name,
        // Evidence quotes the server: application names, slot names.
        crate::terminal::shown(&check.evidence)
    )?;
    if check.status != CheckStatus::Ok && !check.advice.is_empty() {
        outln!("{:<6}-> {}", "", crate::terminal::shown(&check.advice))?;
    }
    Ok(())
}

/// A percentage, `80%` or `80` (0 to 100), as a fraction.
pub(crate) fn parse_percent(text: &str) -> Result<f64, String> {
    let text = text.trim();
    let number = text.strip_suffix('%').unwrap_or(text).trim();
    let value: f64 = number
        .parse()
        .map_err(|_| format!("`{text}` is not a percentage: write e.g. 80% or 0.5%"))?;
    if !(0.0..=100.0).contains(&value) {
        return Err(format!("`{text}` is not between 0% and 100%"));
    }
    Ok(value / 100.0)
}

/// A factor of at least 1, `10` or `10x`.
fn parse_factor(text: &str) -> Result<f64, String> {
    let text = text.trim();
    let number = text.strip_suffix('x').unwrap_or(text);
    match number.parse::<f64>() {
        Ok(value) if value.is_finite() && value >= 1.0 => Ok(value),
        _ => Err(format!(
            "`{text}` is not a factor of at least 1: write e.g. 10 (ten times the packed size)"
        )),
    }
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;

    #[derive(Parser)]
    struct Wrapper {
        #[command(flatten)]
        args: DoctorArgs,
    }

    fn parse(args: &[&str]) -> Result<DoctorOptions, clap::Error> {
        Wrapper::try_parse_from(std::iter::once("doctor").chain(args.iter().copied()))
            .map(|w| w.args.options())
    }

    #[test]
    fn the_flags_default_to_the_librarys_thresholds() {
        assert_eq!(parse(&[]).expect("parse"), DoctorOptions::default());
    }

    #[test]
    fn flags_set_thresholds() {
        let options = parse(&[
            "--xact-warn",
            "30s",
            "--xact-fail",
            "1h30m",
            "--dead-warn",
            "5%",
        ])
        .expect("parse");
        assert_eq!(options.xact_warn, Duration::from_secs(30));
        assert_eq!(options.xact_fail, Duration::from_secs(5400));
        assert_eq!(options.dead_warn, 0.05);
    }

    #[test]
    fn percentages_are_fractions_between_0_and_1() {
        assert_eq!(parse_percent("80%"), Ok(0.8));
        assert_eq!(parse_percent("0.5"), Ok(0.005));
        assert!(parse_percent("120%").is_err());
        assert!(parse_percent("lots").is_err());
        assert_eq!(parse_factor("10x"), Ok(10.0));
        assert!(parse_factor("0.5").is_err());
    }
}
