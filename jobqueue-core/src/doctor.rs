//! `jobqueue doctor`: what hurts a PostgreSQL queue, checked on a live
//! database, each finding with its evidence and what to do about it.
//!
//! [`doctor`] runs the checks; each module here holds those of one kind.

mod format;
mod horizon;
mod keys;
mod schema;
mod server;
mod table;
mod workers;
mod workflows;

use std::time::Duration;

use diesel::PgConnection;
use diesel::connection::SimpleConnection;
use serde::Serialize;

use crate::isolation::in_transaction;
use crate::{Error, Result, sql};

/// How a check came out; ordered from best to worst.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum CheckStatus {
    /// Nothing to do.
    Ok,
    /// Worth a look: it hurts already, or will if it goes on.
    Warn,
    /// Hurting the queue now, or about to: act.
    Fail,
}

impl CheckStatus {
    /// `ok`, `warn` or `fail`.
    pub fn as_str(self) -> &'static str {
        match self {
            CheckStatus::Ok => "ok",
            CheckStatus::Warn => "warn",
            CheckStatus::Fail => "fail",
        }
    }
}

impl std::fmt::Display for CheckStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One finding of [`doctor`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct Check {
    /// What was checked (see [`doctor`] for the names).
    pub name: &'static str,
    /// How it came out.
    pub status: CheckStatus,
    /// What was found, with the figures and names to act on (one line).
    pub evidence: String,
    /// What to do about it; empty when the status is [`CheckStatus::Ok`].
    pub advice: String,
}

impl Check {
    fn ok(name: &'static str, evidence: impl Into<String>) -> Self {
        Check {
            name,
            status: CheckStatus::Ok,
            evidence: evidence.into(),
            advice: String::new(),
        }
    }

    /// A check with `status`; the advice is dropped when it is `Ok`.
    fn graded(
        name: &'static str,
        status: CheckStatus,
        evidence: impl Into<String>,
        advice: impl Into<String>,
    ) -> Self {
        Check {
            name,
            status,
            evidence: evidence.into(),
            advice: if status == CheckStatus::Ok {
                String::new()
            } else {
                advice.into()
            },
        }
    }
}

/// The thresholds of [`doctor`]'s checks. Fractions are 0 to 1 (0.8 is
/// 80 %); a value at or past its threshold counts.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct DoctorOptions {
    /// Warn when a transaction (or a prepared transaction) has been open
    /// this long, or has held the xmin horizon this long. Default 5 min.
    pub xact_warn: Duration,
    /// Fail when it has been open this long. Default 1 h.
    pub xact_fail: Duration,
    /// Warn when a replication slot holds back a horizon this many
    /// transactions old (an inactive slot that holds one warns anyway:
    /// nothing moves it). Default 1,000,000.
    pub slot_warn_xids: u64,
    /// Fail when it is this many transactions old. Default 10,000,000.
    pub slot_fail_xids: u64,
    /// Warn when this fraction of `jobqueue_jobs`'s row versions are dead.
    /// Default 0.2 (where autovacuum's default would have started).
    pub dead_warn: f64,
    /// Fail at this fraction. Default 0.5 (more dead versions than live).
    pub dead_fail: f64,
    /// Below this many dead row versions the table is fine whatever the
    /// fraction. Default 10,000.
    pub dead_min: u64,
    /// Warn when the fetch index is this many times the size it would
    /// have packed with its live entries. Default 10.
    pub index_bloat_warn: f64,
    /// A fetch index smaller than this is fine whatever its bloat.
    /// Default 1 MiB.
    pub index_min_bytes: u64,
    /// Warn when the `LISTEN`/`NOTIFY` queue is this full. Default 0.01
    /// (1 %: with every listener reading, it stays near 0).
    pub notify_warn: f64,
    /// Fail when it is this full. Default 0.5 (PostgreSQL logs warnings
    /// from there on; when it is full, enqueues that notify fail).
    pub notify_fail: f64,
    /// Warn when this fraction of the connections open to non-superusers
    /// is in use. Default 0.8.
    pub connections_warn: f64,
    /// Fail at this fraction. Default 0.95.
    pub connections_fail: f64,
    /// Warn when a live runner's maintenance has not finished a pass for
    /// this long. Default 1 min (a long vacuum or index rebuild may take
    /// that).
    pub maintenance_warn: Duration,
    /// Fail when it has not for this long. Default 10 min.
    pub maintenance_fail: Duration,
}

impl Default for DoctorOptions {
    fn default() -> Self {
        DoctorOptions {
            xact_warn: Duration::from_secs(5 * 60),
            xact_fail: Duration::from_secs(60 * 60),
            slot_warn_xids: 1_000_000,
            slot_fail_xids: 10_000_000,
            dead_warn: 0.2,
            dead_fail: 0.5,
            dead_min: 10_000,
            index_bloat_warn: 10.0,
            index_min_bytes: 1024 * 1024,
            notify_warn: 0.01,
            notify_fail: 0.5,
            connections_warn: 0.8,
            connections_fail: 0.95,
            maintenance_warn: Duration::from_secs(60),
            maintenance_fail: Duration::from_secs(10 * 60),
        }
    }
}

impl DoctorOptions {
    /// Checks that every warn threshold is at most its fail threshold and
    /// that fractions are between 0 and 1: [`Error::InvalidOption`] naming
    /// the pair at fault.
    pub fn validate(&self) -> Result<()> {
        if self.xact_warn > self.xact_fail {
            return Err(Error::invalid(
                "transaction thresholds",
                format!(
                    "warn at {} is above fail at {}",
                    crate::human::human_duration(self.xact_warn),
                    crate::human::human_duration(self.xact_fail)
                ),
            ));
        }
        if self.maintenance_warn > self.maintenance_fail {
            return Err(Error::invalid(
                "maintenance thresholds",
                format!(
                    "warn at {} is above fail at {}",
                    crate::human::human_duration(self.maintenance_warn),
                    crate::human::human_duration(self.maintenance_fail)
                ),
            ));
        }
        if self.slot_warn_xids > self.slot_fail_xids {
            return Err(Error::invalid(
                "replication slot thresholds",
                format!(
                    "warn at {} transactions is above fail at {}",
                    self.slot_warn_xids, self.slot_fail_xids
                ),
            ));
        }
        let fractions = [
            ("dead tuple thresholds", self.dead_warn, self.dead_fail),
            (
                "notify queue thresholds",
                self.notify_warn,
                self.notify_fail,
            ),
            (
                "connection thresholds",
                self.connections_warn,
                self.connections_fail,
            ),
        ];
        for (field, warn, fail) in fractions {
            let (warn_at, fail_at) = (format::percent(warn), format::percent(fail));
            if !(0.0..=1.0).contains(&warn) || !(0.0..=1.0).contains(&fail) {
                let why = format!("{warn_at} and {fail_at} must be between 0 % and 100 %");
                return Err(Error::invalid(field, why));
            }
            if warn > fail {
                let why = format!("warn at {warn_at} is above fail at {fail_at}");
                return Err(Error::invalid(field, why));
            }
        }
        if !self.index_bloat_warn.is_finite() || self.index_bloat_warn < 1.0 {
            return Err(Error::invalid(
                "index bloat threshold",
                format!(
                    "{} is not a factor of at least 1 (10 warns at ten times the packed size)",
                    self.index_bloat_warn
                ),
            ));
        }
        Ok(())
    }
}

/// Runs these checks on the database of `conn`, in this order (their
/// [`Check::name`]s), and returns their findings:
///
/// | name | fails when |
/// | --- | --- |
/// | `migrations` | a migration this library embeds is not applied (the schema is missing, say) |
/// | `vacuum horizon` | something has held the xmin horizon back too long (a transaction of this database, or the holder `engine::xmin_horizon` names) |
/// | `replication slots` | a slot holds back vacuum for too many transactions |
/// | `prepared xacts` | a prepared transaction has been left too long |
/// | `dead tuples` | too much of `jobqueue_jobs` is dead row versions |
/// | `fetch index` | `jobqueue_jobs_fetch_idx` is missing or invalid (warns when bloated) |
/// | `claim plan` | the claim does not read the jobs through `jobqueue_jobs_fetch_idx` |
/// | `workflows` | a blocked step has no parent left to settle, workflow steps ended a minute ago and more are not settled, or a step not ended lost its job's row (warns when steps wait for a retry of a failed step) |
/// | `keys` | never; warns when jobs of a key have waited over a minute for room their key has |
/// | `held leases` | jobs are held past their lease and no live runner can recover them |
/// | `job types` | due jobs have a type no live runner working their queue handles |
/// | `queues` | a queue has due jobs and no live runner works it |
/// | `maintenance` | a live runner's maintenance has not finished a pass for `maintenance_fail` (warns at `maintenance_warn`) |
/// | `notify queue` | the `LISTEN`/`NOTIFY` queue fills up |
/// | `connections` | the connections in use near `max_connections` |
///
/// The checks of the jobs table (`dead tuples` to `queues`) are left out
/// while `migrations` fails: they need the schema. Every check reads the
/// statistics views, the catalogs, or the partial indexes of live jobs, so
/// none costs more with a longer finished history. `claim plan` runs the
/// claim under `EXPLAIN ANALYZE` in a transaction it rolls back (it may
/// hold one due job for that moment: runners skip it).
///
/// Run it on a connection outside a transaction: each check runs in a
/// short transaction of its own, at READ COMMITTED (`claim plan` with the
/// claim's planner settings, as runners run it), waiting at most 5 s for a lock and 30 s for a
/// statement.
///
/// What the checks find is in the [`Check`]s. A statement the database
/// refuses (a permission, a lock or statement timeout) fails its check
/// with the reason, and the other checks still run; the doctor errors only
/// on an invalid threshold ([`DoctorOptions::validate`]) and when it cannot
/// go on (a lost connection).
pub fn doctor(conn: &mut PgConnection, options: &DoctorOptions) -> Result<Vec<Check>> {
    options.validate()?;
    let mut checks = Vec::new();
    let schema = match schema::migrations(conn) {
        Ok(schema) => schema,
        Err(e) => schema::Schema {
            check: could_not(schema::MIGRATIONS_CHECK, &e).ok_or(e)?,
            ready: false,
        },
    };
    checks.push(schema.check);
    graded(conn, options, &HORIZON_CHECKS, &mut checks)?;
    if schema.ready {
        graded(conn, options, &TABLE_CHECKS, &mut checks)?;
        let runners = read(conn, crate::list_runners);
        let covered = [
            workers::HELD_LEASES,
            workers::JOB_TYPES,
            workers::QUEUES,
            workers::MAINTENANCE,
        ];
        match runners {
            Ok(runners) => {
                let live: Vec<_> = runners.iter().filter(|r| !r.is_gone()).collect();
                checks.push(guard(
                    workers::HELD_LEASES,
                    workers::held_leases(conn, &runners, &live),
                )?);
                checks.push(guard(workers::JOB_TYPES, workers::job_types(conn, &live))?);
                checks.push(guard(workers::QUEUES, workers::queues(conn, &live))?);
                checks.push(workers::maintenance(&live, options));
            }
            Err(e) => {
                let failed: Option<Vec<Check>> =
                    covered.iter().map(|name| could_not(name, &e)).collect();
                checks.extend(failed.ok_or(e)?);
            }
        }
    }
    graded(conn, options, &SERVER_CHECKS, &mut checks)?;
    Ok(checks)
}

/// A check that reads the database alone, graded by the options.
type Graded = fn(&mut PgConnection, &DoctorOptions) -> Result<Check>;

/// The checks of the xmin horizon, first after `migrations`.
const HORIZON_CHECKS: [(&str, Graded); 3] = [
    (horizon::TRANSACTIONS, horizon::transactions),
    (horizon::SLOTS, horizon::slots),
    (horizon::PREPARED, horizon::prepared),
];

/// The checks of the jobs table that need no list of runners.
const TABLE_CHECKS: [(&str, Graded); 5] = [
    (table::DEAD_TUPLES, table::dead_tuples),
    (table::FETCH_INDEX_CHECK, table::fetch_index),
    (table::CLAIM_PLAN, |conn, _| table::claim_plan(conn)),
    (workflows::WORKFLOWS, workflows::workflows),
    (keys::KEYS, keys::keys),
];

/// The checks of the server, last.
const SERVER_CHECKS: [(&str, Graded); 2] = [
    (server::NOTIFY_QUEUE, server::notify_queue),
    (server::CONNECTIONS, server::connections),
];

/// Runs `list` in its order, adding what each came to to `checks` (see
/// [`guard`]).
fn graded(
    conn: &mut PgConnection,
    options: &DoctorOptions,
    list: &[(&'static str, Graded)],
    checks: &mut Vec<Check>,
) -> Result<()> {
    for &(name, check) in list {
        checks.push(guard(name, check(conn, options))?);
    }
    Ok(())
}

/// The check `name` came to, or, if the database refused one of its
/// statements, a failed check saying so (see [`could_not`]).
fn guard(name: &'static str, result: Result<Check>) -> Result<Check> {
    result.or_else(|e| could_not(name, &e).ok_or(e))
}

/// A failed check `name` for a statement the database refused (a
/// permission, a lock or statement timeout): the other checks still run.
/// `None` for any other error (a lost connection), which ends the doctor.
fn could_not(name: &'static str, error: &Error) -> Option<Check> {
    use diesel::result::{DatabaseErrorKind, Error as Diesel};
    match error {
        Error::Database(Diesel::DatabaseError(kind, _))
            if !matches!(kind, DatabaseErrorKind::ClosedConnection) =>
        {
            Some(Check::graded(
                name,
                CheckStatus::Fail,
                format!("could not check: {error}"),
                "run the doctor as a role that may read what it checks (the role the runners \
                 use, or a superuser); a timeout means a lock held long on the table: see \
                 vacuum horizon",
            ))
        }
        _ => None,
    }
}

/// Runs `f` in a doctor transaction (see [`doctor`]), as a report (no JIT)
/// with the planner's own choices: the statistics views and catalogs are
/// small, and the claim's settings (no sequential scans, no sorts) would
/// make their plans costly.
fn read<T>(conn: &mut PgConnection, f: impl FnOnce(&mut PgConnection) -> Result<T>) -> Result<T> {
    within(conn, sql::REPORT_BEGIN, f)
}

/// Runs `f` in a doctor transaction with the planner settings a runner's
/// claim runs with: what `claim plan` must see.
fn read_as_runner<T>(
    conn: &mut PgConnection,
    f: impl FnOnce(&mut PgConnection) -> Result<T>,
) -> Result<T> {
    within(conn, sql::HOT_PATH_BEGIN, f)
}

fn within<T>(
    conn: &mut PgConnection,
    begin: &str,
    f: impl FnOnce(&mut PgConnection) -> Result<T>,
) -> Result<T> {
    in_transaction(conn, begin, |conn| {
        conn.batch_execute(sql::DOCTOR_LIMITS)?;
        f(conn)
    })
}

/// `Fail` at or past `fail`, `Warn` at or past `warn`, else `Ok`.
fn grade<T: PartialOrd>(value: T, warn: T, fail: T) -> CheckStatus {
    if value >= fail {
        CheckStatus::Fail
    } else if value >= warn {
        CheckStatus::Warn
    } else {
        CheckStatus::Ok
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_defaults_are_valid() {
        assert!(DoctorOptions::default().validate().is_ok());
    }

    #[test]
    fn a_warn_threshold_above_its_fail_threshold_is_refused() {
        let options = DoctorOptions {
            xact_warn: Duration::from_secs(3600),
            xact_fail: Duration::from_secs(300),
            ..DoctorOptions::default()
        };
        let error = options.validate().expect_err("refused").to_string();
        assert_eq!(
            error,
            "invalid transaction thresholds: warn at 1h 00m is above fail at 5m 00s"
        );
        let options = DoctorOptions {
            connections_fail: 1.5,
            ..DoctorOptions::default()
        };
        assert!(
            options
                .validate()
                .expect_err("refused")
                .to_string()
                .contains("between 0 % and 100 %")
        );
    }

    #[test]
    fn grades_count_a_value_at_its_threshold() {
        assert_eq!(grade(1, 2, 3), CheckStatus::Ok);
        assert_eq!(grade(2, 2, 3), CheckStatus::Warn);
        assert_eq!(grade(3, 2, 3), CheckStatus::Fail);
        assert!(CheckStatus::Ok < CheckStatus::Warn && CheckStatus::Warn < CheckStatus::Fail);
    }
}
