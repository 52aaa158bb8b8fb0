//! The queue's own statements run at READ COMMITTED, whatever the database's
//! default isolation is: under REPEATABLE READ or SERIALIZABLE, SKIP LOCKED
//! claims and lease updates would fail with serialization errors instead of
//! re-reading the newest row version.
//!
//! The `BEGIN` and `SET` commands these run are in `sql/session.rs`.

use diesel::PgConnection;
use diesel::connection::{AnsiTransactionManager, TransactionManager};

use crate::{Error, Result, sql};

/// How a queue statement gets its isolation and planner settings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Scope {
    /// In a transaction of its own opened with the needed settings (or in
    /// the caller's open transaction, as it is).
    Own,
    /// On a `QueueSession`, whose session already has them: one
    /// statement, one round trip.
    Session,
}

/// Runs `f` in a READ COMMITTED transaction of its own, or, when `conn` is
/// already inside a transaction, in that one (the caller chose its isolation).
pub(crate) fn read_committed<T>(
    conn: &mut PgConnection,
    f: impl FnOnce(&mut PgConnection) -> Result<T>,
) -> Result<T> {
    in_transaction(conn, sql::READ_COMMITTED_BEGIN, f)
}

/// Runs `f` in a report's transaction (see [`sql::REPORT_BEGIN`]), or in the
/// caller's open transaction as it is.
pub(crate) fn report<T>(
    conn: &mut PgConnection,
    f: impl FnOnce(&mut PgConnection) -> Result<T>,
) -> Result<T> {
    in_transaction(conn, sql::REPORT_BEGIN, f)
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
