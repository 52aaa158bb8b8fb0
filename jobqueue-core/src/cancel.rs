//! Cancelling a job from outside its worker.

use diesel::prelude::*;
use diesel::sql_types::{Bool, Nullable, Text, Uuid};

use crate::isolation::read_committed;
use crate::{Error, JobId, JobStatus, Result, sql};

/// What [`cancel`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum CancelOutcome {
    /// The job was pending and is now `cancelled`.
    Cancelled,
    /// The job is held by a worker: its cancel flag is raised, its handler
    /// sees it at the next heartbeat or progress report, and its runner
    /// finishes it as `cancelled`.
    Requested,
    /// The job had already finished with this status; nothing changed.
    AlreadyFinished(JobStatus),
}

#[derive(QueryableByName)]
struct StatusRow {
    #[diesel(sql_type = Text)]
    status: JobStatus,
}

#[derive(QueryableByName)]
struct CancelledRow {
    #[diesel(sql_type = Text)]
    status: JobStatus,
    #[diesel(sql_type = Bool)]
    in_workflow: bool,
    #[diesel(sql_type = Text)]
    queue: String,
    #[diesel(sql_type = Nullable<Text>)]
    key: Option<String>,
}

/// Cancels job `id`. [`Error::NotFound`] if there is no such job. A step
/// of a workflow cancelled at once has the steps after it settled in the
/// same transaction, as its workflow says (see [`crate::OnFailure`]); a job
/// with a concurrency key cancelled at once has the next jobs of its key
/// admitted in the same transaction, when the key has room (they waited
/// for the sweep of keys, up to a rescue interval).
pub fn cancel(conn: &mut PgConnection, id: JobId) -> Result<CancelOutcome> {
    read_committed(conn, |conn| {
        let changed = diesel::sql_query(sql::JOB_CANCEL)
            .bind::<Uuid, _>(id)
            .get_result::<CancelledRow>(conn)
            .optional()?;
        if let Some(row) = changed {
            if row.in_workflow && row.status == JobStatus::Cancelled {
                crate::workflow_release::settle_ended_of(conn, &[id])?;
            }
            if let Some(key) = row.key.filter(|_| row.status == JobStatus::Cancelled) {
                crate::admission::admit_keys(
                    conn,
                    &[crate::queue_key::QueueKey {
                        queue: row.queue,
                        key,
                    }],
                )?;
            }
            return Ok(if row.status == JobStatus::Cancelled {
                CancelOutcome::Cancelled
            } else {
                CancelOutcome::Requested
            });
        }
        let current = diesel::sql_query(sql::JOB_GET_STATUS)
            .bind::<Uuid, _>(id)
            .get_result::<StatusRow>(conn)
            .optional()?;
        match current {
            Some(row) => Ok(CancelOutcome::AlreadyFinished(row.status)),
            None => Err(Error::NotFound(id)),
        }
    })
}
