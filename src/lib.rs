//! Test harness for jobqueue's integration tests: a fresh, migrated database
//! per test, on the suite's server ([`server_url`]), so tests run in
//! parallel without seeing each other's jobs.

use std::sync::OnceLock;
use std::sync::atomic::{AtomicU32, Ordering};

use diesel::prelude::*;
use diesel::sql_types::BigInt;

pub mod browser;
pub mod example;
pub mod jobs;
pub mod kit_jobs;
pub mod markdown;
pub mod raw_http;
pub mod span_capture;

/// `url` naming `database` instead of its own (the suite's URLs are its
/// own: one that cannot name a database is a broken setup).
fn with_database(url: &str, database: &str) -> String {
    jobqueue_core::engine::with_database(url, database)
        .unwrap_or_else(|e| panic!("cannot name database {database} in the suite's URL: {e}"))
}

/// Port of the suite's own PostgreSQL cluster (override with
/// `JOBQUEUE_TEST_PG_PORT`).
pub const SUITE_PORT: u16 = 54339;

/// Connections the suite's own cluster accepts: the tests of a binary run
/// at once, each with its runners' pools and processes, and need more
/// than a server's default 100.
pub const SUITE_MAX_CONNECTIONS: u32 = 500;

/// The server all test databases live on, found once per process:
/// `DATABASE_URL` if set, else a PostgreSQL cluster of the suite's own on
/// 127.0.0.1, port [`SUITE_PORT`], started from the machine's binaries
/// (initialized in the temporary folder the first time, and left running
/// for later runs and for other checkouts). The suite's own rather than the
/// machine's server: its tests run in parallel and take up to a few
/// hundred connections, where a server's default is 100 (and other users
/// of the machine's server need theirs), and it runs without `fsync`,
/// since nothing on it needs to survive a crash of the machine (the tests
/// that crash or stop a server start clusters of their own).
pub fn server_url() -> &'static str {
    static URL: OnceLock<String> = OnceLock::new();
    URL.get_or_init(|| {
        if let Ok(url) = std::env::var("DATABASE_URL")
            && !url.trim().is_empty()
        {
            return url;
        }
        let port = std::env::var("JOBQUEUE_TEST_PG_PORT")
            .ok()
            .and_then(|p| p.parse().ok())
            .unwrap_or(SUITE_PORT);
        let base = std::env::temp_dir().join(format!("jobqueue-test-pg-{port}"));
        let max_connections = SUITE_MAX_CONNECTIONS.to_string();
        let cluster = jobqueue_tools::postgres::PrivateCluster::new(base, port)
            .map(|cluster| {
                cluster
                    .with_setting("max_connections", &max_connections)
                    .with_setting("fsync", "off")
                    .with_setting("full_page_writes", "off")
            })
            .and_then(|cluster| cluster.ensure_running().map(|()| cluster))
            .unwrap_or_else(|e| {
                panic!(
                    "no PostgreSQL server for the tests: {e} (scripts/setup installs \
                     PostgreSQL; or set DATABASE_URL to a server's)"
                )
            });
        cluster.url("postgres")
    })
}

/// A database of its own for one test, migrated; dropped when this value is.
pub struct TestDb {
    /// Its URL.
    pub url: String,
    /// The testing kit's database, copied from the suite's template.
    copy: Option<jobqueue::testing::TestDatabase>,
    /// An unmigrated one's name (dropped here).
    name: String,
}

impl TestDb {
    /// A fresh database with the schema migrated: a copy of the suite's
    /// migrated template ([`migrated_template`]), so that the migrations
    /// run once per server rather than once per test.
    pub fn new() -> Self {
        let copy = migrated_template()
            .database()
            .unwrap_or_else(|e| panic!("a test database: {e}"));
        TestDb {
            url: copy.url().to_owned(),
            name: copy.name().to_owned(),
            copy: Some(copy),
        }
    }

    /// Creates a fresh, empty database: no jobqueue schema, not even the
    /// migrations table.
    pub fn unmigrated() -> Self {
        static COUNTER: AtomicU32 = AtomicU32::new(0);
        let name = format!(
            "jq_test_{}_{}_{}",
            std::process::id(),
            COUNTER.fetch_add(1, Ordering::Relaxed),
            fastrand::u32(..)
        );
        exec(&mut admin_conn(), &format!("CREATE DATABASE {name}"));
        TestDb {
            url: with_database(server_url(), &name),
            copy: None,
            name,
        }
    }

    /// A fresh database with the test jobs' side tables, and a connection.
    pub fn with_side_tables() -> (Self, PgConnection) {
        let (db, mut conn) = Self::connected();
        jobs::create_side_tables(&mut conn);
        (db, conn)
    }

    /// A fresh migrated database, and a connection to it.
    pub fn connected() -> (Self, PgConnection) {
        let db = Self::new();
        let conn = db.conn();
        (db, conn)
    }

    /// A new connection to it.
    pub fn conn(&self) -> PgConnection {
        PgConnection::establish(&self.url).expect("connect to the test database")
    }
}

impl Default for TestDb {
    fn default() -> Self {
        Self::new()
    }
}

impl Drop for TestDb {
    fn drop(&mut self) {
        if self.copy.is_some() {
            return; // the kit's drops itself
        }
        let dropped = diesel::sql_query(format!(
            "DROP DATABASE IF EXISTS {} WITH (FORCE)",
            self.name
        ))
        .execute(&mut admin_conn());
        if let Err(e) = dropped {
            eprintln!("could not drop test database {}: {e}", self.name);
        }
    }
}

/// The suite's migrated template on [`server_url`], the testing kit's
/// ([`jobqueue::testing::Template`]), keyed by a digest of the migration
/// files' contents too (the kit goes by their names; here they are edited
/// in place). The process that builds it drops the templates of earlier
/// migrations.
pub fn migrated_template() -> &'static jobqueue::testing::Template {
    static TEMPLATE: OnceLock<jobqueue::testing::Template> = OnceLock::new();
    TEMPLATE.get_or_init(|| {
        let key = format!("migration files {:016x}", migrations_digest());
        let template = jobqueue::testing::Template::new(server_url()).setup(&key, |_| Ok(()));
        let built = template
            .prepare()
            .unwrap_or_else(|e| panic!("the suite's test template: {e}"));
        if built {
            let _ = template.prune_others();
        }
        template
    })
}

/// A digest (FNV-1a, 64 bits) of the migration files' names and contents,
/// in name order.
fn migrations_digest() -> u64 {
    let mut files = Vec::new();
    for folder in migration_folders() {
        for file in std::fs::read_dir(&folder).expect("read a migration's folder") {
            files.push(file.expect("read a migration's folder").path());
        }
    }
    files.sort();
    let mut digest: u64 = 0xcbf2_9ce4_8422_2325;
    for file in files {
        let name = file
            .strip_prefix(MIGRATIONS_ROOT)
            .expect("under migrations/");
        let bytes = std::fs::read(&file).expect("read a migration file");
        for byte in name.to_string_lossy().bytes().chain(bytes) {
            digest = (digest ^ u64::from(byte)).wrapping_mul(0x0100_0000_01b3);
        }
    }
    digest
}

fn admin_conn() -> PgConnection {
    PgConnection::establish(server_url()).expect("connect to the PostgreSQL server")
}

/// Runs `sql` (one or more statements) on `conn`; a refusal panics with
/// the statement.
pub fn exec(conn: &mut PgConnection, sql: &str) {
    use diesel::connection::SimpleConnection;
    conn.batch_execute(sql)
        .unwrap_or_else(|e| panic!("{e}\n{sql}"));
}

/// Turns autovacuum off for the jobs table: its dead rows and statistics
/// stay what the test makes them, until it vacuums or analyzes.
pub fn autovacuum_off(conn: &mut PgConnection) {
    exec(
        conn,
        "ALTER TABLE jobqueue_jobs SET (autovacuum_enabled = false)",
    );
}

#[derive(QueryableByName)]
struct Count {
    #[diesel(sql_type = BigInt)]
    n: i64,
}

/// `SELECT count(*)` of jobs matching a SQL condition (test code only).
pub fn count_where(conn: &mut PgConnection, condition: &str) -> i64 {
    diesel::sql_query(format!(
        "SELECT count(*) AS n FROM jobqueue_jobs WHERE {condition}"
    ))
    .get_result::<Count>(conn)
    .expect("count jobs")
    .n
}

/// How many jobs are in each status that has any, by status name, in
/// lifecycle order.
pub fn status_counts(conn: &mut PgConnection) -> Vec<(&'static str, i64)> {
    #[derive(QueryableByName)]
    struct ByStatus {
        #[diesel(sql_type = diesel::sql_types::Text)]
        status: jobqueue_core::JobStatus,
        #[diesel(sql_type = BigInt)]
        n: i64,
    }
    let mut counts: Vec<_> =
        diesel::sql_query("SELECT status, count(*) AS n FROM jobqueue_jobs GROUP BY status")
            .load::<ByStatus>(conn)
            .expect("count jobs by status")
            .into_iter()
            .map(|row| (row.status, row.n))
            .collect();
    counts.sort();
    counts
        .into_iter()
        .map(|(status, n)| (status.as_str(), n))
        .collect()
}

/// Enqueues one job of `job_type` with an empty payload; returns its id.
pub fn put(
    conn: &mut PgConnection,
    job_type: &str,
    options: jobqueue_core::JobOptions,
) -> jobqueue_core::JobId {
    jobqueue_core::enqueue(
        conn,
        &jobqueue_core::NewJob::new(job_type, "{}", options).expect("a valid job"),
    )
    .expect("enqueue")
    .inserted()
    .expect("inserted, not a duplicate")
}

/// `n` jobs of type `t` with an empty payload, not enqueued yet.
pub fn bare_jobs(n: usize) -> Vec<jobqueue_core::NewJob> {
    (0..n)
        .map(|_| {
            jobqueue_core::NewJob::new("t", "{}", jobqueue_core::JobOptions::new())
                .expect("a valid job")
        })
        .collect()
}

/// Enqueues `jobs` with their type's defaults, in one statement; returns
/// the ids of those inserted (all but any a held unique key skips), in order.
pub fn enqueue_all<J: jobqueue_core::Job>(
    conn: &mut PgConnection,
    jobs: impl IntoIterator<Item = J>,
) -> Vec<jobqueue_core::JobId> {
    let jobs: Vec<J> = jobs.into_iter().collect();
    J::enqueue_many(conn, &jobs).expect("enqueue").inserted
}

/// Enqueues `jobs`, each with `options` over their type's defaults, in one
/// statement; returns the ids of those inserted, in order.
pub fn enqueue_all_with<J: jobqueue_core::Job>(
    conn: &mut PgConnection,
    jobs: impl IntoIterator<Item = J>,
    options: &jobqueue_core::JobOptions,
) -> Vec<jobqueue_core::JobId> {
    let jobs: Vec<jobqueue_core::NewJob> = jobs
        .into_iter()
        .map(|job| jobqueue_core::NewJob::from_job(&job, options.clone()).expect("a valid job"))
        .collect();
    jobqueue_core::enqueue_many(conn, &jobs)
        .expect("enqueue")
        .inserted
}

/// Starts a runner of `registry` with `config`; panics if it does not start.
pub fn start_runner(
    config: jobqueue_runner::RunnerConfig,
    registry: jobqueue_runner::Registry,
) -> jobqueue_runner::RunnerHandle {
    jobqueue_runner::Runner::new(config, registry)
        .start()
        .unwrap_or_else(|e| panic!("start the runner: {e}"))
}

/// Job `id`'s row; panics if there is none.
pub fn read_job(conn: &mut PgConnection, id: jobqueue_core::JobId) -> jobqueue_core::JobRow {
    jobqueue_core::get_job(conn, id)
        .expect("read the job")
        .found()
        .unwrap_or_else(|| panic!("job {id} has no row"))
}

/// A row's job type, priority, queue and most attempts: what a job type
/// declares and an enqueue's options override.
pub fn settings(row: &jobqueue_core::JobRow) -> (&str, i32, &str, i32) {
    (
        row.job_type.as_str(),
        row.priority,
        row.queue.as_str(),
        row.max_attempts,
    )
}

/// Claims one due job as worker `worker_id`; returns its lease. Panics if
/// no job is due.
pub fn claim_one(conn: &mut PgConnection, worker_id: &str) -> jobqueue_core::engine::Lease {
    jobqueue_core::engine::claim(conn, &jobqueue_core::engine::Claim::new(worker_id).limit(1))
        .expect("claim")
        .first()
        .unwrap_or_else(|| panic!("no job due for {worker_id} to claim"))
        .lease()
}

/// Whether job `id` is completed.
pub fn is_completed(conn: &mut PgConnection, id: jobqueue_core::JobId) -> bool {
    jobqueue_core::get_job(conn, id)
        .expect("read the job")
        .found()
        .is_some_and(|job| job.status == jobqueue_core::JobStatus::Completed)
}

/// Waits until job `id` is completed; panics after `timeout`.
pub fn wait_completed(
    conn: &mut PgConnection,
    id: jobqueue_core::JobId,
    timeout: std::time::Duration,
) {
    wait_for(&format!("job {id} to complete"), timeout, || {
        is_completed(conn, id)
    });
}

/// Enqueues a job with `enqueue` and waits until it is completed; returns
/// how long that took (for checking that an idle runner was woken by the
/// job's notification, not by its poll).
pub fn time_to_complete(
    conn: &mut PgConnection,
    enqueue: impl FnOnce(&mut PgConnection) -> jobqueue_core::JobId,
) -> std::time::Duration {
    let started = std::time::Instant::now();
    let id = enqueue(conn);
    wait_completed(conn, id, std::time::Duration::from_secs(30));
    started.elapsed()
}

/// Starts a runner of the bench's no-op job with `config`, polling only
/// once a minute so that only a notification wakes it in time; returns once
/// it is idle (its first claim found nothing).
pub fn start_idle_noop_runner(
    mut config: jobqueue_runner::RunnerConfig,
) -> jobqueue_runner::RunnerHandle {
    config.poll_interval = std::time::Duration::from_secs(60);
    let runner = jobqueue_runner::Runner::new(config, jobqueue_tools::bench::registry())
        .start()
        .expect("start the runner");
    wait_for(
        "the runner's first, empty claim",
        std::time::Duration::from_secs(30),
        || runner.stats().empty_claims >= 1,
    );
    runner
}

/// Enqueues a bench no-op on `conn` and waits until it is completed;
/// returns how long that took (see [`time_to_complete`]).
pub fn noop_time_to_complete(conn: &mut PgConnection) -> std::time::Duration {
    time_to_complete(conn, |conn| {
        jobqueue_core::Job::enqueue(&jobqueue_tools::bench::BenchNoop { seq: 0 }, conn)
            .expect("enqueue")
            .id()
    })
}

/// Sessions on this connection's database other than its own (a runner's
/// connections, for one).
pub fn other_sessions(conn: &mut PgConnection) -> i64 {
    scalar(
        conn,
        "SELECT count(*) AS n FROM pg_stat_activity
         WHERE datname = current_database() AND pid <> pg_backend_pid()",
    )
}

/// Makes every waiting job due now and claimable (skips the wait of a
/// retry backoff or a delay).
pub fn make_due(conn: &mut PgConnection) {
    diesel::sql_query(
        "UPDATE jobqueue_jobs SET run_at = now(), status = 'pending' \
         WHERE status IN ('scheduled', 'pending')",
    )
    .execute(conn)
    .expect("make jobs due");
}

/// How many migrations the schema has (the folders of `jobqueue-core/migrations/`).
pub fn migration_count() -> usize {
    migration_folders().len()
}

/// `jobqueue-core/migrations/`, where the schema's migrations are.
const MIGRATIONS_ROOT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/jobqueue-core/migrations");

/// The folders of `jobqueue-core/migrations/`, one a migration, in name
/// (version) order.
fn migration_folders() -> Vec<std::path::PathBuf> {
    let mut folders: Vec<_> = std::fs::read_dir(MIGRATIONS_ROOT)
        .expect("read jobqueue-core/migrations/")
        .map(|entry| entry.expect("read jobqueue-core/migrations/").path())
        .filter(|path| path.is_dir())
        .collect();
    folders.sort();
    folders
}

/// Makes the lease of every held job expire (as if its worker died).
pub fn expire_leases(conn: &mut PgConnection) {
    diesel::sql_query(
        "UPDATE jobqueue_jobs SET lease_expires_at = now() - interval '1 second' \
         WHERE status IN ('claimed', 'running')",
    )
    .execute(conn)
    .expect("expire leases");
}

/// Polls `condition` every 20 ms until it holds; panics naming `what` after
/// `timeout`. For waiting on other threads and processes through the database.
pub fn wait_for(what: &str, timeout: std::time::Duration, condition: impl FnMut() -> bool) {
    assert!(
        poll_until(timeout, condition),
        "timed out after {timeout:?} waiting for {what}"
    );
}

/// Polls `condition` every 20 ms until it holds (true) or `timeout` passes
/// (false): [`wait_for`] for waits whose timeout is not a failure.
pub fn poll_until(timeout: std::time::Duration, mut condition: impl FnMut() -> bool) -> bool {
    let deadline = std::time::Instant::now() + timeout;
    loop {
        if condition() {
            return true;
        }
        if std::time::Instant::now() >= deadline {
            return false;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

/// How long [`wait_count`] and [`wait_status`] wait before they fail:
/// generous, because the machine may be loaded; they end as soon as their
/// condition holds.
pub const WAIT_LIMIT: std::time::Duration = std::time::Duration::from_secs(60);

/// Waits until [`count_where`] `condition` is `n`; panics after
/// [`WAIT_LIMIT`], with the last count seen.
pub fn wait_count(conn: &mut PgConnection, condition: &str, n: i64) {
    let mut last = None;
    let reached = poll_until(WAIT_LIMIT, || {
        let count = count_where(conn, condition);
        last = Some(count);
        count == n
    });
    assert!(
        reached,
        "timed out after {WAIT_LIMIT:?} waiting for {n} jobs where {condition}; the last count was {last:?}"
    );
}

/// Waits until job `id` is in `status`; panics after [`WAIT_LIMIT`], with
/// the status it was last seen in.
pub fn wait_status(
    conn: &mut PgConnection,
    id: jobqueue_core::JobId,
    status: jobqueue_core::JobStatus,
) {
    let mut last = None;
    let reached = poll_until(WAIT_LIMIT, || {
        last = jobqueue_core::get_job(conn, id)
            .expect("read the job")
            .found()
            .map(|job| job.status);
        last == Some(status)
    });
    assert!(
        reached,
        "timed out after {WAIT_LIMIT:?} waiting for job {id} to be {status:?}; it was last {last:?}"
    );
}

/// Waits until no job is left to run (none scheduled, pending or held);
/// panics after `timeout`.
pub fn wait_no_live_jobs(conn: &mut PgConnection, timeout: std::time::Duration) {
    wait_for("no live job left", timeout, || {
        count_where(
            conn,
            "status IN ('scheduled', 'pending', 'claimed', 'running')",
        ) == 0
    });
}

/// `SELECT count(*)` of side-table rows matching a SQL condition (test code only).
pub fn effects_where(conn: &mut PgConnection, condition: &str) -> i64 {
    diesel::sql_query(format!(
        "SELECT count(*) AS n FROM test_effects WHERE {condition}"
    ))
    .get_result::<Count>(conn)
    .expect("count effects")
    .n
}

/// Asserts that a finished command (`what`) exited successfully, showing
/// its stderr if not.
pub fn assert_success(what: &str, output: &std::process::Output) {
    assert!(
        output.status.success(),
        "{what} failed ({}): {}",
        output.status,
        String::from_utf8_lossy(&output.stderr)
    );
}

/// Asserts that `text` contains each of `parts`, showing `text` if not.
#[track_caller]
pub fn assert_contains(text: &str, parts: &[&str]) {
    for part in parts {
        assert!(text.contains(part), "`{part}` is not in:\n{text}");
    }
}

/// The CSRF token a dashboard page carries in its forms (the first form's:
/// they all carry the same); panics if the page has no form.
pub fn csrf_token(page: &str) -> String {
    const FIELD: &str = "name=\"csrf\" value=\"";
    page.split(FIELD)
        .nth(1)
        .and_then(|rest| rest.split('"').next())
        .unwrap_or_else(|| panic!("no form with a CSRF token in:\n{page}"))
        .to_owned()
}

/// The database's `now()`.
pub fn db_now(conn: &mut PgConnection) -> chrono::DateTime<chrono::Utc> {
    #[derive(QueryableByName)]
    struct Now {
        #[diesel(sql_type = diesel::sql_types::Timestamptz)]
        now: chrono::DateTime<chrono::Utc>,
    }
    diesel::sql_query("SELECT now() AS now")
        .get_result::<Now>(conn)
        .expect("the database's now()")
        .now
}

/// Runs the command-line binary `bin` on the database at `url` with
/// `args`: its exit code, stdout and stderr.
pub fn run_cli(bin: &str, url: &str, args: &[&str]) -> (Option<i32>, String, String) {
    let out = std::process::Command::new(bin)
        .arg("--database-url")
        .arg(url)
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("run {bin}: {e}"));
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// How long the runners of tests that read completed jobs' rows keep them
/// (`RunnerConfig::keep_completed`), set explicitly whatever the default.
pub const KEEP_COMPLETED: std::time::Duration = std::time::Duration::from_secs(24 * 3600);

/// Index entries and table rows this transaction read from `jobqueue_jobs`
/// so far: what its index scans returned, from every index of the table,
/// and what its sequential scans of the table returned.
pub fn entries_read(conn: &mut PgConnection) -> i64 {
    scalar(
        conn,
        "SELECT (pg_stat_get_xact_tuples_returned('jobqueue_jobs'::regclass)
                 + coalesce(sum(pg_stat_get_xact_tuples_returned(indexrelid)), 0))::int8 AS n
         FROM pg_index WHERE indrelid = 'jobqueue_jobs'::regclass",
    )
}

/// Runs `f` in a transaction without parallel workers (whose reads this
/// session would not count) and returns what it returned with the rows
/// and index entries of `jobqueue_jobs` it read ([`entries_read`]).
pub fn counting<T>(conn: &mut PgConnection, f: impl FnOnce(&mut PgConnection) -> T) -> (T, i64) {
    use diesel::connection::SimpleConnection;
    conn.batch_execute("BEGIN; SET LOCAL max_parallel_workers_per_gather = 0")
        .expect("begin");
    let before = entries_read(conn);
    let out = f(conn);
    let read = entries_read(conn) - before;
    conn.batch_execute("COMMIT").expect("commit");
    (out, read)
}

/// A command's output of JSON lines, one value per line.
pub fn json_lines(out: &str) -> Vec<serde_json::Value> {
    out.lines()
        .map(|line| {
            serde_json::from_str(line).unwrap_or_else(|e| panic!("not a JSON line ({e}): {line}"))
        })
        .collect()
}

/// `SELECT` of one `bigint` column named `n` (test code only).
pub fn scalar(conn: &mut PgConnection, query: &str) -> i64 {
    diesel::sql_query(query)
        .get_result::<Count>(conn)
        .unwrap_or_else(|e| panic!("query failed: {e}\n{query}"))
        .n
}

pub mod fault {
    //! Fault injection: runner processes that are killed, frozen and
    //! signalled; PostgreSQL clusters of a test's own that can be stopped and
    //! restarted; the tally of what became of the jobs; and the one-line
    //! summary every fault test prints and asserts on.

    use std::fs::File;
    use std::io::Write;
    use std::path::PathBuf;
    use std::process::{Child, Command, ExitStatus, Stdio};
    use std::time::Duration;

    use diesel::prelude::*;
    use diesel::sql_types::{BigInt, Text};
    use jobqueue_tools::postgres::{PrivateCluster, ThrowawayCluster};

    use super::wait_for;

    /// A child process of a test (usually a runner), killed with SIGKILL and
    /// reaped when dropped, whatever state it is in (a stopped one too), so
    /// a failing assertion never leaves it behind. Its stderr goes to a
    /// file, so a chatty child never blocks on a full pipe; if the test is
    /// panicking, the end of that file is printed when the process is dropped.
    pub struct Proc {
        name: String,
        child: Child,
        stderr_path: PathBuf,
        status: Option<ExitStatus>,
    }

    impl std::fmt::Debug for Proc {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.debug_struct("Proc")
                .field("name", &self.name)
                .field("pid", &self.child.id())
                .field("status", &self.status)
                .finish()
        }
    }

    impl Proc {
        /// Starts `command` (stdin and stdout to /dev/null, stderr to a file).
        pub fn spawn(name: &str, mut command: Command) -> Self {
            let safe: String = name
                .chars()
                .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
                .take(40)
                .collect();
            let stderr_path = std::env::temp_dir().join(format!(
                "jobqueue-fault-{}-{safe}-{:08x}.stderr",
                std::process::id(),
                fastrand::u32(..)
            ));
            let file = File::create(&stderr_path)
                .unwrap_or_else(|e| panic!("create {}: {e}", stderr_path.display()));
            command
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(file);
            let child = command
                .spawn()
                .unwrap_or_else(|e| panic!("start {name}: {e}"));
            Proc {
                name: name.to_owned(),
                child,
                stderr_path,
                status: None,
            }
        }

        /// Starts `bin work` (a worker binary built on the `jobqueue` CLI)
        /// on `url` as worker `worker_id`, with `args` after `work`, logging
        /// warnings and errors.
        pub fn runner(
            bin: &str,
            url: &str,
            worker_id: &str,
            args: &[impl AsRef<std::ffi::OsStr>],
        ) -> Self {
            Self::spawn(worker_id, runner_command(bin, url, worker_id, args))
        }

        /// The name it was started under (a runner's worker id).
        pub fn name(&self) -> &str {
            &self.name
        }

        /// Its process id.
        pub fn pid(&self) -> u32 {
            self.child.id()
        }

        /// Sends `signal` (`KILL`, `TERM`, `STOP`, `CONT`, ...) with `kill`.
        /// Panics if the process was already reaped (its pid may be reused).
        pub fn signal(&self, signal: &str) {
            assert!(
                self.status.is_none(),
                "{} already exited ({:?}); not signalling a pid that may be reused",
                self.name,
                self.status
            );
            assert!(
                signal_pid(self.child.id(), signal),
                "kill -{signal} {} failed",
                self.name
            );
        }

        /// Whether it is still running (or stopped); reaps it if it exited.
        pub fn is_running(&mut self) -> bool {
            if self.status.is_some() {
                return false;
            }
            match self.child.try_wait() {
                Ok(Some(status)) => {
                    self.status = Some(status);
                    false
                }
                Ok(None) => true,
                Err(e) => panic!("wait for {}: {e}", self.name),
            }
        }

        /// Waits up to `within` for it to exit; returns how it exited.
        pub fn wait_exit(&mut self, within: Duration) -> ExitStatus {
            let name = self.name.clone();
            wait_for(&format!("{name} to exit"), within, || !self.is_running());
            self.status.expect("reaped")
        }

        /// Sends SIGTERM and waits up to `within` for it to exit; panics,
        /// showing its stderr, unless it exits with code 0.
        pub fn terminate(&mut self, within: Duration) {
            self.signal("TERM");
            let status = self.wait_exit(within);
            assert_exit_0(self, status);
        }

        /// What it wrote to stderr so far.
        pub fn stderr(&self) -> String {
            std::fs::read(&self.stderr_path)
                .map(|bytes| String::from_utf8_lossy(&bytes).into_owned())
                .unwrap_or_default()
        }
    }

    impl Drop for Proc {
        fn drop(&mut self) {
            if self.status.is_none() {
                // SIGKILL ends a stopped process too.
                let _ = self.child.kill();
                let _ = self.child.wait();
            }
            if std::thread::panicking() {
                let stderr = self.stderr();
                let lines: Vec<&str> = stderr.lines().collect();
                let tail = &lines[lines.len().saturating_sub(30)..];
                let mut out = std::io::stderr().lock();
                let _ = writeln!(out, "--- last stderr lines of {} ---", self.name);
                for line in tail {
                    let _ = writeln!(out, "{line}");
                }
            }
            let _ = std::fs::remove_file(&self.stderr_path);
        }
    }

    /// The command [`Proc::runner`] runs, to adjust before [`Proc::spawn`].
    /// Its runner keeps completed jobs a day, whatever the default (the
    /// environment's `JOBQUEUE_RETAIN_COMPLETED_HOURS`; a flag in `args`
    /// overrides it), so that each job's row shows how often it ran.
    pub fn runner_command(
        bin: &str,
        url: &str,
        worker_id: &str,
        args: &[impl AsRef<std::ffi::OsStr>],
    ) -> Command {
        let mut command = Command::new(bin);
        command
            .arg("--database-url")
            .arg(url)
            .arg("work")
            .arg("--worker-id")
            .arg(worker_id)
            .args(args)
            .env("RUST_LOG", "warn")
            .env("JOBQUEUE_RETAIN_COMPLETED_HOURS", "24");
        command
    }

    /// `work` flags of a runner under fault injection: leases, recovery,
    /// polls and retries short enough that every fault resolves in seconds.
    /// `overrides` (flag without `--`, value) replace these defaults.
    pub fn runner_flags(overrides: &[(&str, &str)]) -> Vec<String> {
        let mut flags: Vec<(&str, &str)> = vec![
            ("concurrency", "4"),
            ("lease-secs", "5"),
            ("rescue-secs", "0.5"),
            ("poll-interval-ms", "250"),
            ("retry-base-ms", "100"),
            ("retry-max-secs", "1"),
            ("grace-secs", "20"),
        ];
        for (flag, value) in overrides {
            match flags.iter_mut().find(|(f, _)| f == flag) {
                Some(entry) => entry.1 = value,
                None => flags.push((flag, value)),
            }
        }
        flags
            .into_iter()
            .flat_map(|(flag, value)| [format!("--{flag}"), value.to_owned()])
            .collect()
    }

    /// Asserts that a child exited with code 0, showing its stderr if not.
    pub fn assert_exit_0(proc: &Proc, status: ExitStatus) {
        assert_eq!(
            status.code(),
            Some(0),
            "{} exited with {status}; stderr:\n{}",
            proc.name(),
            proc.stderr()
        );
    }

    /// Kills (SIGKILL) one of `live`, at random, every 300 to 700 ms and
    /// starts its replacement with `start`, for at most `chaos` and while
    /// `going()` says there is work left; returns how many it killed.
    pub fn kill_and_replace(
        live: &mut Vec<Proc>,
        mut start: impl FnMut() -> Proc,
        chaos: Duration,
        mut going: impl FnMut() -> bool,
    ) -> usize {
        let mut kills = 0;
        let begun = std::time::Instant::now();
        while begun.elapsed() < chaos && going() {
            std::thread::sleep(Duration::from_millis(fastrand::u64(300..700)));
            let mut victim = live.swap_remove(fastrand::usize(..live.len()));
            victim.signal("KILL");
            assert_eq!(victim.wait_exit(Duration::from_secs(10)).code(), None);
            kills += 1;
            live.push(start());
        }
        kills
    }

    /// Stops each of `live` with SIGTERM and asserts it exited with code 0.
    pub fn terminate_all(live: &mut [Proc]) {
        for runner in live {
            runner.signal("TERM");
            let status = runner.wait_exit(Duration::from_secs(30));
            assert_exit_0(runner, status);
        }
    }

    /// A PostgreSQL cluster of one test's own, started from the machine's
    /// binaries on a free port (never the shared server), holding one
    /// migrated database with the test side tables. Stopped (immediate mode)
    /// and deleted when dropped.
    #[derive(Debug)]
    pub struct OwnCluster {
        own: ThrowawayCluster,
        /// URL of its migrated database.
        pub url: String,
    }

    impl OwnCluster {
        /// Initializes and starts the cluster and prepares its database.
        pub fn start() -> Self {
            Self::start_with(&[])
        }

        /// [`OwnCluster::start`], the server started with `settings` (name,
        /// value) on its command line (see `PrivateCluster::with_setting`).
        pub fn start_with(settings: &[(&str, &str)]) -> Self {
            let own = ThrowawayCluster::start("fault-pg", settings).expect(
                "a private PostgreSQL cluster started from this machine's binaries \
                 (apt-get install postgresql)",
            );
            let own = OwnCluster {
                url: own.url("jq_fault"),
                own,
            };
            let mut admin = PgConnection::establish(&own.own.url("postgres"))
                .expect("connect to the private cluster");
            diesel::sql_query("CREATE DATABASE jq_fault")
                .execute(&mut admin)
                .expect("create the database");
            let mut conn = own.conn();
            jobqueue_core::run_migrations(&mut conn).expect("migrate");
            crate::jobs::create_side_tables(&mut conn);
            own
        }

        /// The cluster, to stop and start.
        pub fn cluster(&self) -> &PrivateCluster {
            self.own.cluster()
        }

        /// A new connection to its database.
        pub fn conn(&self) -> PgConnection {
            PgConnection::establish(&self.url).expect("connect to the private cluster")
        }

        /// A new connection to its database that names itself
        /// `application_name`.
        pub fn conn_as(&self, application_name: &str) -> PgConnection {
            PgConnection::establish(&format!("{}?application_name={application_name}", self.url))
                .expect("connect to the private cluster")
        }
    }

    /// A cluster frozen: every server process stopped with SIGSTOP, as a
    /// paused VM leaves it. Its connections hang instead of failing (the
    /// kernel still completes TCP handshakes and acknowledges what is
    /// sent), and new ones never finish their startup. Thawed (SIGCONT)
    /// when dropped, a failed assertion or a panic included, so a test
    /// never leaves a stopped postmaster behind (`pg_ctl stop` cannot stop
    /// one: its signal waits until the process runs again).
    pub struct Frozen<'a> {
        cluster: &'a PrivateCluster,
    }

    impl std::fmt::Debug for Frozen<'_> {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.debug_struct("Frozen")
                .field("port", &self.cluster.port())
                .finish()
        }
    }

    impl<'a> Frozen<'a> {
        /// Stops every process of `cluster`: the postmaster first, so that
        /// no backend starts meanwhile, then its children, listed again
        /// until none is left running.
        pub fn freeze(cluster: &'a PrivateCluster) -> Self {
            // Made first: a failure below thaws what was stopped.
            let frozen = Frozen { cluster };
            let mut stopped = std::collections::HashSet::new();
            loop {
                let running: Vec<u32> = cluster
                    .server_pids()
                    .into_iter()
                    .filter(|pid| !stopped.contains(pid))
                    .collect();
                if running.is_empty() {
                    return frozen;
                }
                for pid in running {
                    let _ = signal_pid(pid, "STOP");
                    stopped.insert(pid);
                }
            }
        }

        /// Lets the server run again (what dropping it does).
        pub fn thaw(self) {}
    }

    impl Drop for Frozen<'_> {
        fn drop(&mut self) {
            for pid in self.cluster.server_pids() {
                let _ = signal_pid(pid, "CONT");
            }
        }
    }

    /// Sends `signal` (`KILL`, `TERM`, `STOP`, `CONT`, ...) to process
    /// `pid` with `kill`; whether it was delivered (false for a process
    /// gone already).
    pub fn signal_pid(pid: u32, signal: &str) -> bool {
        Command::new("kill")
            .arg(format!("-{signal}"))
            .arg(pid.to_string())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|status| status.success())
    }

    /// A streaming standby of an [`OwnCluster`], on a port of its own:
    /// stopped and deleted when dropped.
    #[derive(Debug)]
    pub struct Standby {
        own: ThrowawayCluster,
    }

    impl OwnCluster {
        /// Starts a streaming standby of this cluster (`pg_basebackup -R`),
        /// naming itself `application_name` to the primary, and waits until
        /// it streams. Synchronous once the primary lists it in
        /// `synchronous_standby_names` ([`OwnCluster::require_sync`]).
        pub fn standby(&self, application_name: &str) -> Standby {
            Standby {
                own: ThrowawayCluster::standby_of(
                    self.cluster(),
                    "fault-standby",
                    application_name,
                )
                .expect("a streaming standby from this machine's binaries"),
            }
        }

        /// Makes every commit wait until standby `application_name` has
        /// flushed it (`synchronous_standby_names`), and waits until the
        /// primary reports it synchronous.
        pub fn require_sync(&self, application_name: &str) {
            self.cluster()
                .require_sync(application_name)
                .expect("synchronous replication");
        }

        /// A libpq URL listing this cluster, then `standby`, that connects
        /// only to the one that takes writes (`target_session_attrs`), with
        /// a connect timeout of `connect_timeout` seconds per host.
        pub fn failover_url(&self, standby: &Standby, connect_timeout: u32) -> String {
            jobqueue_tools::failover::url(
                self.cluster(),
                standby.cluster(),
                "jq_fault",
                connect_timeout,
            )
        }
    }

    impl Standby {
        /// The cluster, to promote, stop and start.
        pub fn cluster(&self) -> &PrivateCluster {
            self.own.cluster()
        }

        /// A new connection to the test database on it.
        pub fn conn(&self) -> PgConnection {
            PgConnection::establish(&self.own.url("jq_fault")).expect("connect to the standby")
        }
    }

    /// What became of the jobs of one job type whose payload has an
    /// `exactly_once` flag: exactly-once jobs write an `effect` row in their
    /// completion's transaction; the others write an `execution_kind` row,
    /// committed at once, per execution.
    #[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
    pub struct Tally {
        /// Jobs of the type.
        pub jobs: i64,
        /// Jobs `completed`.
        pub completed: i64,
        /// Jobs still `claimed` or `running`.
        pub held: i64,
        /// Completed exactly-once jobs without an effect row.
        pub missing_effects: i64,
        /// Exactly-once jobs with more than one effect row.
        pub duplicate_effects: i64,
        /// Effect rows of an attempt other than the job's completing one
        /// (an effect that survived its attempt's failure).
        pub stray_effects: i64,
        /// Completed at-least-once jobs without an execution row of their
        /// completing attempt.
        pub missing_executions: i64,
        /// (job, attempt) pairs executed more than once: one claim run twice.
        pub replayed_attempts: i64,
        /// At-least-once executions beyond one per job (attempts that ran
        /// and did not complete the job).
        pub reexecutions: i64,
    }

    impl Tally {
        /// Counts, for job type `job_type`.
        pub fn of(conn: &mut PgConnection, job_type: &str, execution_kind: &str) -> Self {
            #[derive(QueryableByName)]
            struct Row {
                #[diesel(sql_type = BigInt)]
                jobs: i64,
                #[diesel(sql_type = BigInt)]
                completed: i64,
                #[diesel(sql_type = BigInt)]
                held: i64,
                #[diesel(sql_type = BigInt)]
                missing_effects: i64,
                #[diesel(sql_type = BigInt)]
                duplicate_effects: i64,
                #[diesel(sql_type = BigInt)]
                stray_effects: i64,
                #[diesel(sql_type = BigInt)]
                missing_executions: i64,
                #[diesel(sql_type = BigInt)]
                replayed_attempts: i64,
                #[diesel(sql_type = BigInt)]
                reexecutions: i64,
            }
            // Per job: its effect rows, those of another attempt than the
            // completing one, whether its completing attempt executed, its
            // executions of other attempts, and its (attempt, kind) pairs
            // recorded more than once.
            let row = diesel::sql_query(
                "WITH j AS (
                     SELECT id, status, attempts,
                            coalesce((payload->>'exactly_once')::boolean, false) AS eo
                     FROM jobqueue_jobs WHERE job_type = $1),
                 e AS (
                     SELECT j.id,
                            count(*) FILTER (WHERE t.kind = 'effect') AS effects,
                            count(*) FILTER (WHERE t.kind = 'effect'
                                             AND t.attempt <> j.attempts) AS stray,
                            count(*) FILTER (WHERE t.kind = $2
                                             AND t.attempt = j.attempts) AS final_runs,
                            count(*) FILTER (WHERE t.kind = $2
                                             AND t.attempt <> j.attempts) AS other_runs
                     FROM j JOIN test_effects t ON t.job_id = j.id
                     GROUP BY j.id),
                 r AS (
                     SELECT count(*) AS replayed FROM (
                         SELECT t.job_id FROM j JOIN test_effects t ON t.job_id = j.id
                         WHERE t.kind IN ('effect', $2)
                         GROUP BY t.job_id, t.attempt, t.kind HAVING count(*) > 1) AS x)
                 SELECT count(*) AS jobs,
                        count(*) FILTER (WHERE j.status = 'completed') AS completed,
                        count(*) FILTER (WHERE j.status IN ('claimed', 'running')) AS held,
                        count(*) FILTER (WHERE j.eo AND j.status = 'completed'
                                         AND coalesce(e.effects, 0) = 0) AS missing_effects,
                        count(*) FILTER (WHERE j.eo AND e.effects > 1) AS duplicate_effects,
                        coalesce(sum(e.stray) FILTER (WHERE j.eo), 0)::bigint AS stray_effects,
                        count(*) FILTER (WHERE NOT j.eo AND j.status = 'completed'
                                         AND coalesce(e.final_runs, 0) = 0) AS missing_executions,
                        (SELECT replayed FROM r) AS replayed_attempts,
                        coalesce(sum(e.other_runs) FILTER (WHERE NOT j.eo), 0)::bigint
                            AS reexecutions
                 FROM j LEFT JOIN e ON e.id = j.id",
            )
            .bind::<Text, _>(job_type)
            .bind::<Text, _>(execution_kind)
            .get_result::<Row>(conn)
            .expect("tally the jobs");
            Tally {
                jobs: row.jobs,
                completed: row.completed,
                held: row.held,
                missing_effects: row.missing_effects,
                duplicate_effects: row.duplicate_effects,
                stray_effects: row.stray_effects,
                missing_executions: row.missing_executions,
                replayed_attempts: row.replayed_attempts,
                reexecutions: row.reexecutions,
            }
        }

        /// Jobs lost: not completed, or completed without their effect.
        pub fn lost(&self) -> i64 {
            (self.jobs - self.completed) + self.missing_effects + self.missing_executions
        }

        /// Work done twice where once was promised: a second effect, an
        /// effect of a failed attempt, or one claim executed twice.
        pub fn duplicated(&self) -> i64 {
            self.duplicate_effects + self.stray_effects + self.replayed_attempts
        }
    }

    /// One fault test's outcome: printed as one line (straight to the
    /// process's stderr, so it shows even when the test harness captures
    /// output) and asserted on.
    #[derive(Debug, Clone, PartialEq, Eq)]
    pub struct Summary {
        /// Which scenario.
        pub scenario: &'static str,
        /// Jobs in play.
        pub jobs: i64,
        /// Faults injected.
        pub faults: i64,
        /// Jobs lost (not in their expected final state, or missing an effect).
        pub lost: i64,
        /// Jobs done twice where once was promised.
        pub duplicated: i64,
        /// Scenario-specific figures, `key=value` separated by spaces.
        pub detail: String,
    }

    impl Summary {
        /// The one-line summary.
        pub fn line(&self) -> String {
            format!(
                "fault summary [{}]: jobs={} faults={} lost={} duplicated={}{}{}",
                self.scenario,
                self.jobs,
                self.faults,
                self.lost,
                self.duplicated,
                if self.detail.is_empty() { "" } else { " " },
                self.detail
            )
        }

        /// Prints the line, then asserts that faults were injected and
        /// nothing was lost or duplicated.
        pub fn print_and_check(&self) {
            let line = self.line();
            let _ = writeln!(std::io::stderr().lock(), "{line}");
            assert!(self.faults > 0, "no fault was injected: {line}");
            assert!(self.jobs > 0, "no jobs: {line}");
            assert_eq!(self.lost, 0, "jobs lost: {line}");
            assert_eq!(self.duplicated, 0, "jobs duplicated: {line}");
        }
    }
}
