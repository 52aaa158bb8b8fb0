//! The start of a queue's claim order: its first due job, and how much of
//! the claim index a claim reads to find it.

use chrono::{DateTime, Utc};
use diesel::prelude::*;
use diesel::sql_types::{Array, BigInt, Integer, Nullable, Text, Timestamptz};

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
    #[diesel(sql_type = Text)]
    queue: String,
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
    let mut heads = queue_heads(conn, &[queue.to_owned()])?;
    Ok(heads.pop().map_or(
        QueueHead {
            entries_read: 0,
            first: None,
        },
        |(_, head)| head,
    ))
}

/// [`queue_head`] of each of `queues` (distinct names, at most
/// [`MAX_QUEUE_HEADS`]) in one statement, in their order.
pub fn queue_heads(conn: &mut PgConnection, queues: &[String]) -> Result<Vec<(String, QueueHead)>> {
    if queues.len() > MAX_QUEUE_HEADS {
        return Err(crate::Error::invalid(
            "queues",
            format!(
                "{} queue heads in one look; at most {MAX_QUEUE_HEADS}",
                queues.len()
            ),
        ));
    }
    for queue in queues {
        limits::check_queue(queue)?;
    }
    let rows = diesel::sql_query(sql::JOB_QUEUE_HEADS)
        .bind::<Array<Text>, _>(queues)
        .load::<HeadRow>(conn)?;
    Ok(rows
        .into_iter()
        .map(|row| {
            let first = match (row.priority, row.run_at, row.id) {
                (Some(priority), Some(run_at), Some(id)) => Some(Resume {
                    queue: row.queue.clone(),
                    priority,
                    run_at,
                    id,
                }),
                _ => None,
            };
            let head = QueueHead {
                entries_read: row.entries_read,
                first,
            };
            (row.queue, head)
        })
        .collect())
}

/// The most queues [`queue_heads`] looks at in one statement.
pub const MAX_QUEUE_HEADS: usize = 1000;

impl crate::session::QueueSession {
    /// [`queue_heads`], in one round trip.
    pub fn queue_heads(&mut self, queues: &[String]) -> Result<Vec<(String, QueueHead)>> {
        queue_heads(self.conn(), queues)
    }

    /// [`queue_head`], in one round trip.
    pub fn queue_head(&mut self, queue: &str) -> Result<QueueHead> {
        queue_head(self.conn(), queue)
    }
}
