//! A test's connection: the queue's schema in place, a test transaction
//! begun.

use diesel::{Connection, PgConnection};
use jobqueue_core::Result;

/// A connection to `database_url` for one test: the queue's migrations
/// applied (committed, once for all tests: concurrent callers take turns),
/// then a test transaction begun, so everything the test does on it, jobs
/// enqueued and worked included, is rolled back when it is dropped.
pub fn connect(database_url: &str) -> Result<PgConnection> {
    let mut conn = PgConnection::establish(database_url)?;
    jobqueue_core::run_migrations(&mut conn)?;
    conn.begin_test_transaction()?;
    Ok(conn)
}
