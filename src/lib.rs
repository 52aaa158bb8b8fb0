//! Test harness for jobqueue's integration tests: a fresh, migrated database
//! per test, on the server [`jobqueue_runner::postgres::database_url`] finds
//! (or starts), so tests run in parallel without seeing each other's jobs.

use std::sync::OnceLock;
use std::sync::atomic::{AtomicU32, Ordering};

use diesel::prelude::*;
use diesel::sql_types::BigInt;

pub mod jobs;

pub use jobqueue_runner::postgres::with_database;

/// The server all test databases live on, found once per process.
pub fn server_url() -> &'static str {
    static URL: OnceLock<String> = OnceLock::new();
    URL.get_or_init(|| match jobqueue_runner::postgres::database_url() {
        Ok(url) => url,
        Err(e) => panic!("no PostgreSQL server for the tests: {e}"),
    })
}

/// A database of its own for one test, migrated; dropped when this value is.
pub struct TestDb {
    /// Its URL.
    pub url: String,
    name: String,
}

impl TestDb {
    /// Creates and migrates a fresh database.
    pub fn new() -> Self {
        static COUNTER: AtomicU32 = AtomicU32::new(0);
        let name = format!(
            "jq_test_{}_{}_{}",
            std::process::id(),
            COUNTER.fetch_add(1, Ordering::Relaxed),
            fastrand::u32(..)
        );
        let mut admin = admin_conn();
        diesel::sql_query(format!("CREATE DATABASE {name}"))
            .execute(&mut admin)
            .expect("create the test database");
        let db = TestDb {
            url: with_database(server_url(), &name),
            name,
        };
        jobqueue_core::run_migrations(&mut db.conn()).expect("migrate the test database");
        db
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

fn admin_conn() -> PgConnection {
    PgConnection::establish(server_url()).expect("connect to the PostgreSQL server")
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

/// Makes every pending job due now (skips the wait of a retry backoff).
pub fn make_due(conn: &mut PgConnection) {
    diesel::sql_query("UPDATE jobqueue_jobs SET run_at = now() WHERE status = 'pending'")
        .execute(conn)
        .expect("make jobs due");
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
pub fn wait_for(what: &str, timeout: std::time::Duration, mut condition: impl FnMut() -> bool) {
    let deadline = std::time::Instant::now() + timeout;
    while !condition() {
        assert!(
            std::time::Instant::now() < deadline,
            "timed out after {timeout:?} waiting for {what}"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
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
