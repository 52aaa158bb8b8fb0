//! Results an enqueuer awaits, on diesel-async's [`AsyncPgConnection`]
//! (feature `async`): [`crate::result`] and [`crate::wait_result`],
//! awaited instead of blocked on, for a request handler that waits for
//! its job.

use std::time::Duration;

use diesel::sql_types::Uuid;
use diesel_async::{AnsiTransactionManager, AsyncPgConnection, RunQueryDsl, TransactionManager};
use futures_util::StreamExt;
use serde::de::DeserializeOwned;
use tokio::time::Instant;

use crate::job_result::{
    JobResult, RECHECK, RESULTS_CHANNEL, ResultRow, inside_a_transaction, read,
};
use crate::{Error, JobId, Result, sql};

/// [`crate::result`], awaited.
pub async fn result_async<T: DeserializeOwned>(
    conn: &mut AsyncPgConnection,
    id: JobId,
) -> Result<JobResult<T>> {
    let row = diesel::sql_query(sql::RESULT_READ)
        .bind::<Uuid, _>(id)
        .get_result::<ResultRow>(conn)
        .await?;
    read(id, row)
}

/// [`crate::wait_result`], awaited: woken by the completion's notification
/// on `conn` (which listens while it waits), looking again every
/// [`RECHECK`]. `conn` must be outside a transaction.
pub async fn wait_result_async<T: DeserializeOwned>(
    conn: &mut AsyncPgConnection,
    id: JobId,
    timeout: Duration,
) -> Result<JobResult<T>> {
    let depth = AnsiTransactionManager::transaction_manager_status_mut(conn)
        .transaction_depth()
        .map_err(Error::Database)?;
    if depth.is_some() {
        return Err(inside_a_transaction());
    }
    let deadline = Instant::now() + timeout;
    diesel::sql_query(format!("LISTEN {RESULTS_CHANNEL}"))
        .execute(conn)
        .await?;
    let waited = wait_listening(conn, id, deadline).await;
    // A connection that goes back to a pool must not keep listening.
    let unlisten = diesel::sql_query(format!("UNLISTEN {RESULTS_CHANNEL}"))
        .execute(conn)
        .await;
    let outcome = waited?;
    unlisten?;
    Ok(outcome)
}

/// [`wait_result_async`]'s loop, on a connection that listens.
async fn wait_listening<T: DeserializeOwned>(
    conn: &mut AsyncPgConnection,
    id: JobId,
    deadline: Instant,
) -> Result<JobResult<T>> {
    let ours = id.to_string();
    loop {
        let seen = result_async::<T>(conn, id).await?;
        let now = Instant::now();
        if seen.is_final() || now >= deadline {
            return Ok(seen);
        }
        let look_again = (now + RECHECK).min(deadline);
        let mut heard = std::pin::pin!(conn.notifications_stream());
        while let Ok(Some(notification)) = tokio::time::timeout_at(look_again, heard.next()).await {
            if notification?.payload == ours {
                break;
            }
        }
    }
}
