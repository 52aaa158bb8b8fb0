//! The queue's own statements run at READ COMMITTED, whatever the database's
//! default isolation is: under REPEATABLE READ or SERIALIZABLE, SKIP LOCKED
//! claims and lease updates would fail with serialization errors instead of
//! re-reading the newest row version.

use diesel::PgConnection;
use diesel::connection::{AnsiTransactionManager, TransactionManager};

use crate::{Error, Result};

/// Runs `f` in a READ COMMITTED transaction of its own, or, when `conn` is
/// already inside a transaction, in that one (the caller chose its isolation).
pub(crate) fn read_committed<T>(
    conn: &mut PgConnection,
    f: impl FnOnce(&mut PgConnection) -> Result<T>,
) -> Result<T> {
    let depth = AnsiTransactionManager::transaction_manager_status_mut(conn)
        .transaction_depth()
        .map_err(Error::Database)?;
    if depth.is_some() {
        f(conn)
    } else {
        conn.build_transaction().read_committed().run(f)
    }
}
