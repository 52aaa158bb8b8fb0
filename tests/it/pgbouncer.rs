//! Behind a connection pooler: a real PgBouncer of the test's own in front
//! of the test server. Applications enqueue through transaction pooling
//! (enqueueing keeps no session state); a runner pointed at a transaction
//! pool refuses to start and says why, and works through a session pool.
//!
//! PgBouncer comes from Debian's package, unpacked into `target/tools/` by
//! `scripts/setup` (or on the PATH, or named by `PGBOUNCER`).

use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::time::Duration;

use diesel::connection::CacheSize;
use diesel::prelude::*;
use jobqueue_core::{Job, JobOptions, NewJob};
use jobqueue_runner::{Runner, RunnerConfig, RunnerError};
use jobqueue_tests::jobs::Noop;
use jobqueue_tests::{
    TestDb, count_where, run_cli, server_url, start_runner, wait_count, wait_for,
};

const WORKER: &str = env!("CARGO_BIN_EXE_jobqueue-test-worker");

/// A PgBouncer process in front of the test server, on a port of its own;
/// stopped and deleted when dropped.
struct Bouncer {
    child: Child,
    dir: PathBuf,
    port: u16,
}

impl Drop for Bouncer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn pgbouncer_program() -> PathBuf {
    let candidates = [
        std::env::var_os("PGBOUNCER").map(PathBuf::from),
        Some(Path::new(env!("CARGO_MANIFEST_DIR")).join("target/tools/pgbouncer")),
        Some(PathBuf::from("/usr/sbin/pgbouncer")),
    ];
    candidates
        .into_iter()
        .flatten()
        .find(|path| path.is_file())
        .or_else(|| {
            std::env::var_os("PATH")
                .iter()
                .flat_map(std::env::split_paths)
                .map(|dir| dir.join("pgbouncer"))
                .find(|path| path.is_file())
        })
        .expect("pgbouncer (scripts/setup unpacks it into target/tools/)")
}

/// Host, port and user of the test server's URL (`postgres://user@host:port/...`).
fn server_address() -> (String, u16, String) {
    let url = server_url();
    let rest = url.split_once("://").map_or(url, |(_, rest)| rest);
    let (user, rest) = rest.split_once('@').unwrap_or(("postgres", rest));
    let authority = rest.split(['/', '?']).next().unwrap_or(rest);
    let (host, port) = authority.rsplit_once(':').unwrap_or((authority, "5432"));
    let user = user.split(':').next().unwrap_or(user);
    (
        host.to_owned(),
        port.parse().expect("a port in the server URL"),
        user.to_owned(),
    )
}

impl Bouncer {
    /// Starts PgBouncer in `pool_mode` (`transaction` or `session`),
    /// passing every database through to the test server.
    fn start(pool_mode: &str) -> Self {
        let port = jobqueue_tools::postgres::free_port().expect("a free port");
        let dir = std::env::temp_dir().join(format!("jobqueue-pgbouncer-{port}"));
        std::fs::create_dir_all(&dir).expect("the pooler's directory");
        let (host, server_port, user) = server_address();
        let ini = dir.join("pgbouncer.ini");
        std::fs::write(
            &ini,
            format!(
                "[databases]\n* = host={host} port={server_port} user={user}\n\
                 [pgbouncer]\nlisten_addr = 127.0.0.1\nlisten_port = {port}\n\
                 unix_socket_dir =\nauth_type = any\npool_mode = {pool_mode}\n\
                 default_pool_size = 10\nmax_client_conn = 200\n\
                 logfile = {log}\n",
                log = dir.join("pgbouncer.log").display()
            ),
        )
        .expect("write pgbouncer.ini");
        // PgBouncer refuses to run as root.
        let mut command =
            jobqueue_tools::postgres::unprivileged_command(&pgbouncer_program(), &dir)
                .expect("a command to run pgbouncer");
        let child = command
            .arg(&ini)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start pgbouncer");
        let bouncer = Bouncer { child, dir, port };
        let probe = bouncer.url("postgres");
        wait_for(
            "PgBouncer to accept connections",
            Duration::from_secs(20),
            || PgConnection::establish(&probe).is_ok(),
        );
        bouncer
    }

    /// URL of `database` through the pooler.
    fn url(&self, database: &str) -> String {
        let (_, _, user) = server_address();
        format!("postgres://{user}@127.0.0.1:{}/{database}", self.port)
    }
}

fn database_name(db: &TestDb) -> String {
    db.url
        .rsplit('/')
        .next()
        .and_then(|tail| tail.split('?').next())
        .expect("a database name")
        .to_owned()
}

/// An application's connection through a transaction pool: Diesel's
/// statement cache off, since a transaction pool cannot keep a named
/// prepared statement from one transaction to the next.
fn app_connection(url: &str) -> PgConnection {
    let mut conn = PgConnection::establish(url).expect("connect through PgBouncer");
    conn.set_prepared_statement_cache_size(CacheSize::Disabled);
    conn
}

/// A runner's configuration on `url`: four workers, completed jobs kept.
fn config(url: &str) -> RunnerConfig {
    RunnerConfig::new(url)
        .keep_completed(jobqueue_tests::KEEP_COMPLETED)
        .concurrency(4)
}

fn noops(n: usize) -> Vec<NewJob> {
    (0..n)
        .map(|i| NewJob::from_job(&Noop { n: i as u64 }, JobOptions::new()).expect("a job"))
        .collect()
}

#[test]
fn applications_enqueue_through_transaction_pooling() {
    let (db, mut direct) = TestDb::with_side_tables();
    let bouncer = Bouncer::start("transaction");
    let url = bouncer.url(&database_name(&db));
    // Each thread: 20 single enqueues, a batch of 10 (one INSERT), a batch
    // of 500 (COPY), two enqueues in a committed transaction of the
    // application's and one in a rolled back one. More threads than the
    // pool has server sessions, so sessions change hands between them.
    const THREADS: usize = 12;
    let per_thread = 20 + 10 + 500 + 2;
    let threads: Vec<_> = (0..THREADS)
        .map(|t| {
            let url = url.clone();
            std::thread::spawn(move || {
                let mut conn = app_connection(&url);
                for i in 0..20 {
                    Noop {
                        n: (t * 100 + i) as u64,
                    }
                    .enqueue(&mut conn)
                    .expect("a single enqueue");
                }
                jobqueue_core::enqueue_many(&mut conn, &noops(10)).expect("a batch");
                jobqueue_core::enqueue_many(&mut conn, &noops(500)).expect("a COPY batch");
                conn.transaction(|conn| {
                    Noop { n: 1 }.enqueue(conn)?;
                    Noop { n: 2 }.enqueue(conn)?;
                    Ok::<_, jobqueue_core::Error>(())
                })
                .expect("the application's transaction");
                let rolled_back: Result<(), jobqueue_core::Error> = conn.transaction(|conn| {
                    Noop { n: 3 }.enqueue(conn)?;
                    Err(diesel::result::Error::RollbackTransaction.into())
                });
                assert!(rolled_back.is_err());
            })
        })
        .collect();
    for thread in threads {
        thread.join().expect("an enqueueing thread");
    }
    let expected = (THREADS * per_thread) as i64;
    assert_eq!(count_where(&mut direct, "true"), expected);

    // The enqueues' notifications reach a runner connected directly.
    let runner = start_runner(config(&db.url), jobqueue_tests::jobs::registry());
    wait_count(&mut direct, "status = 'completed'", expected);
    runner.shutdown();
}

#[test]
fn a_runner_refuses_a_transaction_pool_and_says_why() {
    let db = TestDb::new();
    let bouncer = Bouncer::start("transaction");
    let url = bouncer.url(&database_name(&db));
    let Err(RunnerError::Config(message)) =
        Runner::new(config(&url), jobqueue_tests::jobs::registry()).start()
    else {
        panic!("a runner started behind a transaction pool");
    };
    for words in ["transaction", "session", "LISTEN", "directly"] {
        assert!(message.contains(words), "`{words}` not in: {message}");
    }
    // The worker binary exits at once with the message (a configuration
    // error: exit code 2); nothing was claimed.
    let mut direct = db.conn();
    Noop { n: 1 }.enqueue(&mut direct).expect("enqueue");
    let (code, _, stderr) = run_cli(WORKER, &url, &["work"]);
    assert_eq!(code, Some(2), "{stderr}");
    assert!(stderr.contains("connection pooler"), "{stderr}");
    assert_eq!(count_where(&mut direct, "status = 'pending'"), 1);
}

#[test]
fn a_runner_works_through_a_session_pool() {
    let (db, mut direct) = TestDb::with_side_tables();
    let bouncer = Bouncer::start("session");
    let url = bouncer.url(&database_name(&db));
    jobqueue_core::enqueue_many(&mut direct, &noops(200)).expect("enqueue");
    let runner = start_runner(config(&url), jobqueue_tests::jobs::registry());
    wait_count(&mut direct, "status = 'completed'", 200);
    // And a job enqueued now is picked up by notification through the pool.
    Noop { n: 7 }.enqueue(&mut direct).expect("enqueue");
    wait_count(&mut direct, "status = 'completed'", 201);
    runner.shutdown();
}
