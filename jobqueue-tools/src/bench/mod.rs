//! `jobqueue bench`: measured throughput and latency of the queue, printed
//! as rows of median and min–max over several runs, with ratios against
//! baselines run in the same process.
//!
//! The bench works in a database of its own (default `jobqueue_bench`,
//! created and dropped by the bench); it refuses a database that holds jobs
//! unless given `--force`. PostgreSQL's settings are left as they are (run
//! it against a server at its durable defaults: fsync and
//! synchronous_commit on).

mod async_handlers;
mod bare_queue;
mod bounded;
mod burn;
pub mod chaos;
mod claim_plan;
mod drain;
mod durable;
mod enqueue;
mod enqueue_async;
mod extensions;
mod failover;
mod footprint;
mod history;
mod isolation;
mod keys;
mod latency;
mod many_queues;
mod noop;
mod pickup_floor;
mod queues;
mod results;
mod scale;
mod soak;
mod tags;
mod trace;
#[cfg(feature = "tracing")]
mod trace_memory;
mod trace_part;
mod unhandled_backlog;
mod wait_sampler;
mod workflows;

use std::path::PathBuf;
use std::time::Duration;

use diesel::{Connection, PgConnection, RunQueryDsl};

use crate::ToolError;

pub use noop::{BenchNoop, registry};
pub(crate) use trace::PLAIN_BIN_HELP;
pub use trace_part::TraceVariant;

/// The measurements, by the names `--only` takes.
pub const MEASUREMENTS: [&str; 32] = [
    "bulk",
    "txn",
    "async",
    "burn",
    "metrics",
    "middleware",
    "bare",
    "floor",
    "plan",
    "drain",
    "pickup",
    "history",
    "isolation",
    "steady",
    "fleet",
    "footprint",
    "limit",
    "keys",
    "workflows",
    "fair",
    "scale",
    "spread",
    "backlog",
    "bounded",
    "tags",
    "steps",
    "tasks",
    "results",
    "soak",
    "failover",
    "trace",
    "chaos",
];

/// Producer rate of the fleet measurement, jobs/s: a light, steady load.
const FLEET_RATE: u32 = 400;
/// Longest fleet run, seconds.
const FLEET_SECS: u64 = 20;

/// What to run, and how big.
#[derive(Debug, Clone)]
pub struct BenchOptions {
    /// Runs per measurement (at least 1; 3 for published figures).
    pub runs: usize,
    /// Small sizes for a smoke test: figures are not comparable.
    pub quick: bool,
    /// Only these measurements (empty: all but the soak, the failover, the
    /// trace and the chaos checker). Names: bulk, txn, burn, metrics, middleware, floor, drain, pickup,
    /// history, isolation, steady, fleet, footprint, limit, keys, workflows, fair,
    /// scale, spread, backlog, bounded, tags, steps, soak (minutes long), failover (clusters of its own,
    /// from the PostgreSQL binaries), trace (the `tracing` feature's cost,
    /// against `plain_bin`), chaos (the stateful checker, clusters of its
    /// own): the last four run only when named.
    pub only: Vec<String>,
    /// Database to create for the bench; one of that name the bench did not
    /// create is refused, never dropped.
    pub database: String,
    /// Use the bench's own database even if an earlier run left jobs in it
    /// (they are deleted).
    pub force: bool,
    /// Producer rate of the steady-state run, jobs/s.
    pub steady_rate: u32,
    /// Length of one steady-state run.
    pub steady_secs: u64,
    /// Length of the soak (run only when named in `only`).
    pub soak_secs: u64,
    /// Adversary operations per run of the stateful checker (`chaos`, run
    /// only when named in `only`).
    pub chaos_ops: usize,
    /// PostgreSQL restarts the checker's adversary may do per run.
    pub chaos_restarts: usize,
    /// How long the soak's runner keeps completed jobs (`None`: the
    /// runner's default).
    pub soak_keep_completed: Option<Duration>,
    /// A `jobqueue` binary built without the `tracing` feature, for the
    /// trace measurement (which needs this binary built with it).
    pub plain_bin: Option<PathBuf>,
}

/// Sizes of each measurement, full or quick.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Sizes {
    pub(crate) bulk_jobs: usize,
    pub(crate) txn_threads: usize,
    pub(crate) txn_duration: Duration,
    pub(crate) burn_jobs: usize,
    pub(crate) burn_workers: &'static [usize],
    pub(crate) floor_threads: usize,
    pub(crate) drain_jobs: usize,
    pub(crate) drain_runs: usize,
    pub(crate) floor_batch: i64,
    pub(crate) pickup_jobs: usize,
    pub(crate) pickup_pause: Duration,
    pub(crate) history_rows: usize,
    pub(crate) history_claims: usize,
    pub(crate) footprint_workers: usize,
    pub(crate) idle_window: Duration,
    pub(crate) fair_backlog: usize,
    /// Busy keys of the `keys` claim cost.
    pub(crate) key_busy_keys: usize,
    /// Jobs waiting behind each busy key of the `keys` claim cost.
    pub(crate) key_busy_waiting: usize,
    /// Children of the `workflows` fan-out (one fan-in job after them).
    pub(crate) workflow_children: usize,
    pub(crate) scale_finished: usize,
    pub(crate) scale_pending: usize,
    pub(crate) spread_jobs: usize,
    pub(crate) backlog_jobs: usize,
    pub(crate) backlog_unknown: usize,
    /// Live workflow steps, and waiting keyed jobs, of the `bounded`
    /// maintenance pass.
    pub(crate) bounded_rows: usize,
    /// How long the rate limit that binds is worked, at most (`bounded`).
    pub(crate) bounded_within: Duration,
    pub(crate) trace_enqueues: usize,
    pub(crate) trace_drain_jobs: usize,
    pub(crate) trace_drains: usize,
    /// Finished jobs of the `tags` list.
    pub(crate) tag_rows: usize,
    /// Jobs of ten durable steps of the `steps` burn-down.
    pub(crate) stepped_jobs: usize,
}

impl Sizes {
    fn new(quick: bool) -> Self {
        if quick {
            Sizes {
                bulk_jobs: 5_000,
                txn_threads: 8,
                txn_duration: Duration::from_millis(300),
                burn_jobs: 3_000,
                burn_workers: &[1, 8],
                floor_threads: 8,
                floor_batch: 100,
                drain_jobs: 5_000,
                drain_runs: 3,
                pickup_jobs: 20,
                pickup_pause: Duration::from_millis(5),
                history_rows: 20_000,
                history_claims: 20,
                footprint_workers: 16,
                idle_window: Duration::from_secs(1),
                fair_backlog: 3_000,
                key_busy_keys: 100,
                key_busy_waiting: 100,
                workflow_children: 2_000,
                scale_finished: 200_000,
                scale_pending: 10_000,
                spread_jobs: 5_000,
                backlog_jobs: 5_000,
                backlog_unknown: 50_000,
                bounded_rows: 20_000,
                bounded_within: Duration::from_secs(5),
                trace_enqueues: 300,
                trace_drain_jobs: 5_000,
                trace_drains: 2,
                tag_rows: 20_000,
                stepped_jobs: 100,
            }
        } else {
            Sizes {
                bulk_jobs: 200_000,
                txn_threads: 8,
                txn_duration: Duration::from_secs(3),
                burn_jobs: 200_000,
                burn_workers: &[1, 8, 32, 128],
                floor_threads: 8,
                floor_batch: 100,
                drain_jobs: 50_000,
                drain_runs: 20,
                pickup_jobs: 500,
                pickup_pause: Duration::from_millis(10),
                history_rows: 1_000_000,
                history_claims: 200,
                footprint_workers: 128,
                idle_window: Duration::from_secs(10),
                fair_backlog: 100_000,
                key_busy_keys: 1_000,
                key_busy_waiting: 100,
                workflow_children: 10_000,
                scale_finished: 10_000_000,
                scale_pending: 100_000,
                spread_jobs: 20_000,
                backlog_jobs: 20_000,
                backlog_unknown: 500_000,
                bounded_rows: 1_000_000,
                bounded_within: Duration::from_secs(30),
                trace_enqueues: 5_000,
                trace_drain_jobs: 50_000,
                trace_drains: 5,
                tag_rows: 10_000_000,
                stepped_jobs: 5_000,
            }
        }
    }
}

/// One printed row: a figure measured over several runs.
#[derive(Debug, Clone)]
pub(crate) struct Row {
    pub(crate) name: String,
    pub(crate) unit: &'static str,
    pub(crate) values: Vec<f64>,
    pub(crate) note: String,
}

impl Row {
    pub(crate) fn new(name: impl Into<String>, unit: &'static str, values: Vec<f64>) -> Self {
        Row {
            name: name.into(),
            unit,
            values,
            note: String::new(),
        }
    }

    pub(crate) fn note(mut self, note: impl Into<String>) -> Self {
        self.note = note.into();
        self
    }

    /// This row's values over `base`'s, run by run (the runs of one
    /// measurement pair up with those of its baseline in the same run).
    pub(crate) fn over(&self, base: &Row) -> Vec<f64> {
        self.values
            .iter()
            .zip(&base.values)
            .map(|(value, base)| value / base)
            .collect()
    }

    pub(crate) fn median(&self) -> f64 {
        median(&self.values)
    }

    fn print(&self) {
        let min = self.values.iter().copied().fold(f64::INFINITY, f64::min);
        let max = self
            .values
            .iter()
            .copied()
            .fold(f64::NEG_INFINITY, f64::max);
        crate::out!(
            "{:<46} {:>12} {:>25} {:<8} {}",
            self.name,
            fmt(self.median()),
            format!("{} – {}", fmt(min), fmt(max)),
            self.unit,
            self.note
        );
    }
}

fn fmt(value: f64) -> String {
    if !value.is_finite() {
        "-".to_owned()
    } else if value.abs() >= 100.0 {
        format!("{value:.0}")
    } else if value.abs() >= 1.0 {
        format!("{value:.2}")
    } else {
        format!("{value:.3}")
    }
}

/// The median of `values` (NaN if empty).
pub(crate) fn median(values: &[f64]) -> f64 {
    if values.is_empty() {
        return f64::NAN;
    }
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    let mid = sorted.len() / 2;
    if sorted.len().is_multiple_of(2) {
        (sorted[mid - 1] + sorted[mid]) / 2.0
    } else {
        sorted[mid]
    }
}

/// The `p` quantile (0..=1) of `sorted`.
pub(crate) fn quantile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let rank = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[rank.min(sorted.len() - 1)]
}

/// A database error as a runner error.
pub(crate) fn db<E: Into<jobqueue_core::Error>>(e: E) -> ToolError {
    ToolError::Queue(e.into())
}

/// Empties the jobs table between runs.
pub(crate) fn reset(conn: &mut PgConnection) -> Result<(), ToolError> {
    diesel::sql_query("TRUNCATE jobqueue_jobs")
        .execute(conn)
        .map_err(db)?;
    Ok(())
}

/// Writes every dirty page out (`CHECKPOINT`) before a measurement, so that
/// no checkpoint the WAL of earlier runs called for falls inside it, and
/// each measurement starts from the same state (the first write of each
/// page after a checkpoint logs the whole page).
pub(crate) fn checkpoint(conn: &mut PgConnection) -> Result<(), ToolError> {
    diesel::sql_query("CHECKPOINT").execute(conn).map_err(db)?;
    Ok(())
}

#[derive(diesel::QueryableByName)]
struct Count {
    #[diesel(sql_type = diesel::sql_types::BigInt)]
    n: i64,
}

/// `SELECT count(*) FROM jobqueue_jobs WHERE condition` (bench code only).
pub(crate) fn count(conn: &mut PgConnection, condition: &str) -> Result<i64, ToolError> {
    Ok(diesel::sql_query(format!(
        "SELECT count(*) AS n FROM jobqueue_jobs WHERE {condition}"
    ))
    .get_result::<Count>(conn)
    .map_err(db)?
    .n)
}

/// Creates the bench's database on `server_url` (refusing a database the
/// bench did not create, and one of its own that holds jobs unless `force`);
/// returns its URL.
fn prepare_database(server_url: &str, options: &BenchOptions) -> Result<String, ToolError> {
    let name = &options.database;
    if crate::tool_db::check_owned(server_url, name, "bench")? {
        let url = jobqueue_core::engine::with_database(server_url, name)?;
        if let Ok(mut existing) = PgConnection::establish(&url) {
            let jobs = count(&mut existing, "true").unwrap_or(0);
            if jobs > 0 && !options.force {
                return Err(ToolError::Usage(format!(
                    "database `{name}` holds {jobs} jobs from an earlier bench: this run would \
                     delete them; pass --force, or --database another name"
                )));
            }
        }
    }
    let url = crate::tool_db::recreate(server_url, name, "bench")?;
    let mut conn = PgConnection::establish(&url).map_err(db)?;
    jobqueue_core::run_migrations(&mut conn)?;
    Ok(url)
}

#[derive(diesel::QueryableByName)]
struct Setting {
    #[diesel(sql_type = diesel::sql_types::Text)]
    setting: String,
}

fn setting(conn: &mut PgConnection, name: &str) -> String {
    diesel::sql_query("SELECT current_setting($1) AS setting")
        .bind::<diesel::sql_types::Text, _>(name)
        .get_result::<Setting>(conn)
        .map(|s| s.setting)
        .unwrap_or_else(|_| "?".to_owned())
}

/// One run of the trace measurement's `variant` in the bench's database
/// `database` on the server at `server_url` (started by the measurement,
/// as a process of its own): prints its figures as one line of JSON.
pub fn trace_part(
    server_url: &str,
    database: &str,
    variant: TraceVariant,
    quick: bool,
) -> Result<(), ToolError> {
    if !crate::tool_db::check_owned(server_url, database, "bench")? {
        return Err(ToolError::Usage(format!(
            "--trace-part: database `{database}` does not exist; this part is started by \
             `jobqueue bench --only trace`, in the database it made"
        )));
    }
    let url = jobqueue_core::engine::with_database(server_url, database)?;
    trace_part::run(&url, variant, &Sizes::new(quick))
}

/// Runs the bench against the server at `server_url`.
pub fn run(server_url: &str, options: &BenchOptions) -> Result<(), ToolError> {
    let sizes = Sizes::new(options.quick);
    let runs = options.runs.max(1);
    let url = prepare_database(server_url, options)?;
    let mut conn = PgConnection::establish(&url).map_err(db)?;
    let wanted = |name: &str| options.only.is_empty() || options.only.iter().any(|o| o == name);
    crate::out!(
        "jobqueue bench: {} runs per row{}; PostgreSQL {} (fsync={}, synchronous_commit={}, wal_sync_method={}, autovacuum={}); {} CPUs",
        runs,
        if options.quick {
            " (quick sizes: not comparable)"
        } else {
            ""
        },
        setting(&mut conn, "server_version"),
        setting(&mut conn, "fsync"),
        setting(&mut conn, "synchronous_commit"),
        setting(&mut conn, "wal_sync_method"),
        setting(&mut conn, "autovacuum"),
        std::thread::available_parallelism()
            .map(|n| n.get())
            .unwrap_or(1)
    );
    crate::out!(
        "{:<46} {:>12} {:>25} {:<8} note",
        "measurement",
        "median",
        "min – max",
        "unit"
    );
    let mut burn_rows: Vec<Row> = Vec::new();
    if wanted("bulk") {
        enqueue::bulk(&url, &sizes, runs)?.print();
    }
    if wanted("txn") {
        for row in enqueue::transactional(&url, &sizes, runs)? {
            row.print();
        }
    }
    if wanted("async") {
        for row in enqueue_async::compare(&url, &sizes, runs)? {
            row.print();
        }
    }
    if wanted("burn") {
        for row in burn::burn_down(&url, &sizes, runs)? {
            row.print();
            burn_rows.push(row);
        }
    }
    if wanted("bare") {
        let bare = bare_queue::burn_down(&url, &sizes, runs)?;
        bare.print();
        if let Some(eight) = burn_rows
            .iter()
            .find(|row| row.name.starts_with("burn-down, 8 workers"))
        {
            Row::new(
                "burn-down, 8 workers / bare-SQL queue",
                "ratio",
                eight.over(&bare),
            )
            .note("same run; target ≥ 0.95")
            .print();
        }
    }
    if wanted("floor") {
        let floor = burn::floor(&url, &sizes, runs)?;
        floor.print();
        // The fastest burn-down (the first of equals).
        let best = burn_rows.iter().reduce(|best, row| {
            if row.median() > best.median() {
                row
            } else {
                best
            }
        });
        if let Some(best) = best {
            Row::new(
                "runner best burn-down / bare-SQL floor",
                "ratio",
                best.over(&floor),
            )
            .note(format!("best: {}", best.name))
            .print();
        }
    }
    // Named, it needs pg_stat_statements; a run of everything takes it
    // where the server has it loaded.
    if wanted("plan") {
        let named = !options.only.is_empty();
        claim_plan::measure(&url, &sizes, runs, named)?
            .iter()
            .for_each(Row::print);
    }
    let steady_secs = if options.quick {
        options.steady_secs.min(3)
    } else {
        options.steady_secs
    };
    // The measurements whose rows are printed as they are.
    type Measure<'a> = Box<dyn Fn() -> Result<Vec<Row>, ToolError> + 'a>;
    let measurements: [(&str, Measure<'_>); 21] = [
        (
            "metrics",
            Box::new(|| burn::metrics_cost(&url, &sizes, runs)),
        ),
        (
            "middleware",
            Box::new(|| extensions::middleware_cost(&url, &sizes, runs)),
        ),
        ("drain", Box::new(|| drain::drains(&url, &sizes))),
        ("pickup", Box::new(|| latency::pickup(&url, &sizes, runs))),
        (
            "history",
            Box::new(|| history::claim_cost(&url, &sizes, runs)),
        ),
        (
            "isolation",
            Box::new(|| isolation::claim_isolation(&url, &sizes, runs)),
        ),
        (
            "steady",
            Box::new(|| {
                let length = Duration::from_secs(steady_secs);
                latency::steady(&url, options.steady_rate, length, runs)
            }),
        ),
        (
            "fleet",
            Box::new(|| {
                let length = Duration::from_secs(steady_secs.min(FLEET_SECS));
                let mut rows = latency::fleet(&url, FLEET_RATE, length, runs)?;
                rows.extend(latency::late_commits(&url, runs)?);
                Ok(rows)
            }),
        ),
        (
            "footprint",
            Box::new(|| footprint::measure(&url, &sizes, runs)),
        ),
        ("limit", Box::new(|| queues::limit_cost(&url, &sizes, runs))),
        ("keys", Box::new(|| keys::measure(&url, &sizes, runs))),
        (
            "workflows",
            Box::new(|| workflows::measure(&url, &sizes, runs)),
        ),
        ("fair", Box::new(|| queues::fair_share(&url, &sizes, runs))),
        ("scale", Box::new(|| scale::at_scale(&url, &sizes, runs))),
        (
            "spread",
            Box::new(|| many_queues::many_queues(&url, &sizes, runs)),
        ),
        (
            "backlog",
            Box::new(|| unhandled_backlog::measure(&url, &sizes, runs)),
        ),
        ("bounded", Box::new(|| bounded::measure(&url, &sizes, runs))),
        ("tags", Box::new(|| tags::list_by_tag(&url, &sizes, runs))),
        ("steps", Box::new(|| durable::step_cost(&url, &sizes, runs))),
        (
            "tasks",
            Box::new(|| async_handlers::measure(&url, &sizes, runs)),
        ),
        ("results", Box::new(|| results::measure(&url, &sizes, runs))),
    ];
    for (name, measure) in measurements {
        if wanted(name) {
            measure()?.iter().for_each(Row::print);
        }
    }
    // Minutes long: only when asked for by name.
    if options.only.iter().any(|o| o == "soak") {
        let secs = if options.quick {
            options.soak_secs.min(30)
        } else {
            options.soak_secs
        };
        soak::soak(&url, options.steady_rate, secs, options.soak_keep_completed)?
            .iter()
            .for_each(Row::print);
    }
    // Clusters of its own, made from the PostgreSQL binaries: only when
    // asked for by name.
    if options.only.iter().any(|o| o == "failover") {
        failover::measure(runs)?.iter().for_each(Row::print);
    }
    // The stateful checker, on clusters of its own: only when asked for by
    // name.
    if options.only.iter().any(|o| o == "chaos") {
        let ops = if options.quick {
            options.chaos_ops.min(300)
        } else {
            options.chaos_ops
        };
        chaos::measure(runs, ops, options.chaos_restarts)?
            .iter()
            .for_each(Row::print);
    }
    // Needs a second build (without the feature): only when asked for by
    // name.
    if options.only.iter().any(|o| o == "trace") {
        let plain_bin = options.plain_bin.as_deref().ok_or_else(|| {
            ToolError::Usage(format!(
                "--only trace needs --plain-bin: {}",
                trace::PLAIN_BIN_HELP
            ))
        })?;
        let bench = trace::TraceBench {
            server_url,
            database: &options.database,
            plain_bin,
            quick: options.quick,
        };
        trace::measure(&bench, &sizes, runs)?
            .iter()
            .for_each(Row::print);
    }
    drop(conn);
    crate::tool_db::drop_own(server_url, &options.database, "bench")
}
