//! The start of a queue's claim order: its first due job, and how much of
//! the claim index a claim reads to find it.

use chrono::{DateTime, Utc};
use diesel::prelude::*;
use diesel::sql_types::{BigInt, Integer, Nullable, Text, Timestamptz};

use crate::claim::Resume;
use crate::{JobId, Result, limits, sql};

/// What a claim from the start of a queue reads before its first due job.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QueueHead {
    /// Entries of the claim index read to find the first due job (or to
    /// find none): 1 when nothing is in the way. Each job claimed since the
    /// oldest open snapshot began adds one, until vacuum can remove the
    /// versions it left; a claim from the start reads them all, twice.
    pub entries_read: i64,
    /// The first due job's place in the queue's claim order, as a
    /// [`Resume`] point (a claim resuming there leaves that job out); none
    /// if the queue has no due job.
    pub first: Option<Resume>,
}

#[derive(QueryableByName)]
struct HeadRow {
    #[diesel(sql_type = BigInt)]
    entries_read: i64,
    #[diesel(sql_type = Nullable<Integer>)]
    priority: Option<i32>,
    #[diesel(sql_type = Nullable<Timestamptz>)]
    run_at: Option<DateTime<Utc>>,
    #[diesel(sql_type = Nullable<diesel::sql_types::Uuid>)]
    id: Option<JobId>,
}

/// Finds the first due job of `queue` from the start of its claim order,
/// and how many claim-index entries that read (see [`QueueHead`]). One
/// statement; the count is this session's own, so other sessions' reads do
/// not enter it.
pub fn queue_head(conn: &mut PgConnection, queue: &str) -> Result<QueueHead> {
    limits::check_queue(queue)?;
    let row = diesel::sql_query(sql::JOB_QUEUE_HEAD)
        .bind::<Text, _>(queue)
        .get_result::<HeadRow>(conn)?;
    let first = match (row.priority, row.run_at, row.id) {
        (Some(priority), Some(run_at), Some(id)) => Some(Resume {
            queue: queue.to_owned(),
            priority,
            run_at,
            id,
        }),
        _ => None,
    };
    Ok(QueueHead {
        entries_read: row.entries_read,
        first,
    })
}
