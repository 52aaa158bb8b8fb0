//! The queue's own statements run at READ COMMITTED, whatever the database's
//! default isolation is: under REPEATABLE READ or SERIALIZABLE, SKIP LOCKED
//! claims and lease updates would fail with serialization errors instead of
//! re-reading the newest row version.

use diesel::PgConnection;
use diesel::connection::{AnsiTransactionManager, TransactionManager};

use crate::{Error, Result};

/// How a queue statement gets its isolation and planner settings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Scope {
    /// In a transaction of its own opened with the needed settings (or in
    /// the caller's open transaction, as it is).
    Own,
    /// On a [`crate::QueueSession`], whose session already has them: one
    /// statement, one round trip.
    Session,
}

/// Opening of a queue statement's own transaction.
pub(crate) const READ_COMMITTED_BEGIN: &str = "BEGIN ISOLATION LEVEL READ COMMITTED";

/// Session settings of a [`crate::QueueSession`]: what [`READ_COMMITTED_BEGIN`]
/// and [`CLAIM_BEGIN`] set per transaction, set once for the session.
pub(crate) const SESSION_SETUP: &str = "SET SESSION CHARACTERISTICS AS TRANSACTION ISOLATION LEVEL READ COMMITTED; \
     SET enable_bitmapscan = off; SET enable_sort = off";

/// Runs `f` in a READ COMMITTED transaction of its own, or, when `conn` is
/// already inside a transaction, in that one (the caller chose its isolation).
pub(crate) fn read_committed<T>(
    conn: &mut PgConnection,
    f: impl FnOnce(&mut PgConnection) -> Result<T>,
) -> Result<T> {
    in_transaction(conn, READ_COMMITTED_BEGIN, f)
}

/// Runs `f` as `scope` says: in a transaction opened by `begin`, or as is.
pub(crate) fn scoped<T>(
    conn: &mut PgConnection,
    scope: Scope,
    begin: &str,
    f: impl FnOnce(&mut PgConnection) -> Result<T>,
) -> Result<T> {
    match scope {
        Scope::Own => in_transaction(conn, begin, f),
        Scope::Session => f(conn),
    }
}

/// Opening of the claim's transaction: READ COMMITTED, and a plan that walks
/// the fetch index in order. A queue table's statistics are often stale (a
/// burst of inserts since the last ANALYZE); the planner may then pick a
/// bitmap scan and sort every pending row to return the first few. Ruling
/// out bitmap scans and sorts for this one transaction leaves the ordered
/// scan of `jobqueue_jobs_fetch_idx`, which stops after LIMIT rows.
pub(crate) const CLAIM_BEGIN: &str = "BEGIN ISOLATION LEVEL READ COMMITTED; \
     SET LOCAL enable_bitmapscan = off; SET LOCAL enable_sort = off";

/// Runs `f` in a transaction opened by `begin` (one round trip), or, when
/// `conn` is already inside a transaction, in that one as it is.
pub(crate) fn in_transaction<T>(
    conn: &mut PgConnection,
    begin: &str,
    f: impl FnOnce(&mut PgConnection) -> Result<T>,
) -> Result<T> {
    let depth = AnsiTransactionManager::transaction_manager_status_mut(conn)
        .transaction_depth()
        .map_err(Error::Database)?;
    if depth.is_some() {
        return f(conn);
    }
    AnsiTransactionManager::begin_transaction_sql(&mut *conn, begin)?;
    match f(conn) {
        Ok(value) => {
            AnsiTransactionManager::commit_transaction(&mut *conn)?;
            Ok(value)
        }
        Err(e) => {
            // The error that ended the transaction is the one to report.
            let _ = AnsiTransactionManager::rollback_transaction(&mut *conn);
            Err(e)
        }
    }
}
