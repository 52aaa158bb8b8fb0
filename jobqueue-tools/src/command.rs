//! `jobqueue demo` and `jobqueue bench`: the commands the `jobqueue` binary
//! adds to the operational ones of [`jobqueue_cli::Cli`].

use jobqueue_cli::CliError;

use crate::ToolError;
use std::path::PathBuf;

use crate::bench::{BenchOptions, MEASUREMENTS, TraceVariant};

/// The demo and the bench, as subcommands.
#[derive(Debug, clap::Subcommand)]
pub enum ToolCommand {
    /// Enqueue a realistic mix of jobs, work them, and report.
    Demo(DemoArgs),
    /// Measure throughput and latency (in a database of its own).
    Bench(BenchArgs),
}

/// `jobqueue demo`.
#[derive(Debug, clap::Args)]
pub struct DemoArgs {
    /// Jobs to enqueue.
    #[arg(long, default_value_t = 10_000)]
    jobs: usize,
    /// Worker threads.
    #[arg(long, short = 'c', default_value_t = 16)]
    concurrency: usize,
    /// Database to create for the demo (recreated on each run; a database of
    /// that name the demo did not create is refused, never dropped).
    #[arg(long, default_value = "jobqueue_demo")]
    database: String,
}

/// `jobqueue bench`.
#[derive(Debug, clap::Args)]
pub struct BenchArgs {
    /// Runs per measurement.
    #[arg(long, default_value_t = 3)]
    runs: usize,
    /// Small sizes, for a smoke test (figures not comparable).
    #[arg(long)]
    quick: bool,
    /// Only these measurements, comma-separated: bulk, txn, async, burn, metrics, middleware,
    /// bare, floor, plan, drain, pickup, history, isolation, steady, fleet, footprint,
    /// limit, keys, workflows, fair, scale, spread, backlog, bounded, soak, failover, trace, chaos
    /// (plan reads pg_stat_statements, which --own-cluster loads: named, it
    /// needs it, and a full run leaves it out where the server lacks it;
    /// the last four run only when named: the soak takes --soak-secs, the failover
    /// builds a primary and a standby of its own from the PostgreSQL server
    /// binaries, the trace needs a build with `--features tracing` and
    /// --plain-bin; scripts/bench-trace runs it; chaos, the stateful checker,
    /// runs --runs runs of --chaos-ops operations on clusters of its own).
    #[arg(long, value_delimiter = ',')]
    only: Vec<String>,
    /// Database to create for the bench (dropped at the end; a database of
    /// that name the bench did not create is refused, never dropped).
    #[arg(long, default_value = "jobqueue_bench")]
    database: String,
    /// Use the bench's own database even if an earlier run left jobs in it
    /// (they are deleted).
    #[arg(long)]
    force: bool,
    /// Producer rate of the steady-state run, jobs/s.
    #[arg(long, default_value_t = 5000)]
    steady_rate: u32,
    /// Length of each steady-state run, seconds.
    #[arg(long, default_value_t = 60)]
    steady_secs: u64,
    /// Length of the soak, seconds: the producer at --steady-rate, the
    /// xmin horizon pinned through the middle third.
    #[arg(long, default_value_t = 600)]
    soak_secs: u64,
    /// How long the soak's runner keeps completed jobs, hours (default: a
    /// runner's default, 0: deleted as they complete).
    #[arg(long)]
    soak_retain_completed_hours: Option<f64>,
    /// Adversary operations per run of the stateful checker (`--only
    /// chaos`: --runs runs, the first with the seed in JOBQUEUE_CHAOS_SEED
    /// if set).
    #[arg(long, default_value_t = 2000)]
    chaos_ops: usize,
    /// PostgreSQL restarts per run of the stateful checker.
    #[arg(long, default_value_t = 2)]
    chaos_restarts: usize,
    /// Run on a throwaway PostgreSQL cluster of the bench's own, at
    /// PostgreSQL's defaults (autovacuum on), made from the machine's
    /// PostgreSQL binaries under the system temp directory, stopped and
    /// removed at the end; instead of --database-url.
    #[arg(long)]
    own_cluster: bool,
    /// For `--only trace`: a `jobqueue` binary built without the `tracing`
    /// feature, to compare this build (with it) against.
    #[arg(long)]
    plain_bin: Option<PathBuf>,
    /// One run of the trace measurement's variant, in the bench's database
    /// (made by the measurement, which starts this).
    #[arg(long, hide = true, value_enum)]
    trace_part: Option<TraceVariant>,
}

impl jobqueue_cli::Extra for ToolCommand {
    fn run(self, database_url: Option<String>) -> Result<(), CliError> {
        self.run_tool(database_url)
            .map_err(|e| CliError::Extra(Box::new(e)))
    }
}

impl ToolCommand {
    /// Runs the demo or the bench on the server at `database_url`, else on
    /// the local server if one answers, else on a private cluster; the bench
    /// with `--own-cluster` on a throwaway cluster instead.
    fn run_tool(self, database_url: Option<String>) -> Result<(), ToolError> {
        let server = || match &database_url {
            Some(url) => Ok(url.clone()),
            None => crate::postgres::database_url(),
        };
        match self {
            ToolCommand::Demo(demo) => {
                crate::demo::run(&server()?, &demo.database, demo.jobs, demo.concurrency)
            }
            ToolCommand::Bench(bench) => {
                let own_cluster = bench.own_cluster;
                if own_cluster && database_url.is_some() {
                    return Err(ToolError::Usage(
                        "--own-cluster runs the bench on a cluster of its own: give it without \
                         --database-url (and with DATABASE_URL unset)"
                            .into(),
                    ));
                }
                if let Some(variant) = bench.trace_part {
                    return crate::bench::trace_part(
                        &server()?,
                        &bench.database,
                        variant,
                        bench.quick,
                    );
                }
                let options = bench.options()?;
                if !own_cluster {
                    return crate::bench::run(&server()?, &options);
                }
                // Stopped and removed when dropped, the bench done.
                // With pg_stat_statements where the server has it (`--only
                // plan` reads it): loading it changes no durability setting.
                let statements: &[(&str, &str)] =
                    if crate::postgres::server_has_library("pg_stat_statements") {
                        &[
                            ("shared_preload_libraries", "pg_stat_statements"),
                            ("pg_stat_statements.track_planning", "on"),
                        ]
                    } else {
                        &[]
                    };
                let own = crate::postgres::ThrowawayCluster::start("bench", statements)?;
                eprintln!(
                    "jobqueue bench: on a cluster of its own at {} (removed at the end)",
                    own.url("postgres")
                );
                crate::bench::run(&own.url("postgres"), &options)
            }
        }
    }
}

impl BenchArgs {
    /// The options, or what is wrong with the arguments.
    fn options(self) -> Result<BenchOptions, ToolError> {
        if let Some(unknown) = self
            .only
            .iter()
            .find(|o| !MEASUREMENTS.contains(&o.as_str()))
        {
            return Err(ToolError::Usage(format!(
                "--only: unknown measurement `{unknown}` (known: {})",
                MEASUREMENTS.join(", ")
            )));
        }
        if self.only.iter().any(|o| o == "trace") {
            check_trace(self.plain_bin.as_deref())?;
        }
        if !self.quick && self.soak_secs < 60 {
            return Err(ToolError::Usage(format!(
                "--soak-secs {}: the soak compares its first minute with its last; \
                 give it at least 60",
                self.soak_secs
            )));
        }
        let soak_keep_completed = match self.soak_retain_completed_hours {
            None => None,
            Some(h) if h.is_finite() && (0.0..=87_600.0).contains(&h) => {
                Some(std::time::Duration::from_secs_f64(h * 3600.0))
            }
            Some(h) => {
                return Err(ToolError::Usage(format!(
                    "--soak-retain-completed-hours {h}: give 0 (delete completed \
                     jobs as they complete) up to 87600 hours"
                )));
            }
        };
        Ok(BenchOptions {
            runs: self.runs,
            quick: self.quick,
            only: self.only,
            database: self.database,
            force: self.force,
            steady_rate: self.steady_rate,
            steady_secs: self.steady_secs,
            soak_secs: self.soak_secs,
            soak_keep_completed,
            chaos_ops: self.chaos_ops,
            chaos_restarts: self.chaos_restarts,
            plain_bin: self.plain_bin,
        })
    }
}

/// What the trace measurement needs: this binary built with the `tracing`
/// feature, and `plain_bin`, one built without it.
fn check_trace(plain_bin: Option<&std::path::Path>) -> Result<(), ToolError> {
    use crate::bench::PLAIN_BIN_HELP;
    if !cfg!(feature = "tracing") {
        return Err(ToolError::Usage(
            "--only trace: this binary was built without the `tracing` feature; run the bench \
             from a build with `--features tracing`, beside --plain-bin (scripts/bench-trace \
             builds both)"
                .into(),
        ));
    }
    match plain_bin {
        None => Err(ToolError::Usage(format!(
            "--only trace needs --plain-bin: {PLAIN_BIN_HELP}"
        ))),
        Some(path) if !path.is_file() => Err(ToolError::Usage(format!(
            "--plain-bin {}: no such file; {PLAIN_BIN_HELP}",
            path.display()
        ))),
        Some(_) => Ok(()),
    }
}
