//! Listing jobs, page by page (the command line's `list`, a dashboard's job
//! lists): filters, keyset pagination, counts with a bound, finished jobs
//! per minute, and deleting a finished job.
//!
//! Every read here costs what one page, one bound or one window holds,
//! never a scan of the whole history: pages continue from the last row
//! shown (no `OFFSET`), counts stop at their bound, and the per-minute
//! counts read at most [`THROUGHPUT_MOST`] of the latest finished jobs.
//! A filter no index serves (a queue or type among finished jobs, say) is
//! searched in the latest [`SEARCH_WINDOW`] jobs below the cursor, and the
//! page says where the search stopped ([`JobPage::searched_to`]).

use chrono::{DateTime, Utc};
use diesel::prelude::*;
use diesel::sql_types::{BigInt, Nullable, Text, Timestamptz, Uuid};

pub use crate::human::human_duration;
use crate::isolation::{read_committed, report};
use crate::{Error, JobId, JobRow, JobStatus, Result, limits, sql};

mod text;

/// The order of a job list.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum JobOrder {
    /// Newest first (by id: ids are time-ordered).
    #[default]
    Newest,
    /// By when they are (or were) due, soonest first. Only for a live
    /// status (blocked, waiting, scheduled, pending, unhandled, claimed,
    /// running): the
    /// finished history has no index by `run_at`.
    RunAt,
    /// By when they finished, latest first. Only for a finished status
    /// (completed, failed, cancelled): the pruning index, and for failed
    /// jobs the dead letter's, hold them in that order.
    Finished,
}

/// Where a page starts: after the last row of the page before.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum JobCursor {
    /// After this id (newest first).
    Before(JobId),
    /// After this `run_at` and id (by `run_at`).
    After(DateTime<Utc>, JobId),
    /// Before this `finished_at` and id (by when they finished).
    FinishedBefore(DateTime<Utc>, JobId),
}

/// Which jobs a page shows.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct JobQuery {
    /// Only jobs in this status.
    pub status: Option<JobStatus>,
    /// Only jobs in this queue.
    pub queue: Option<String>,
    /// Only jobs of this type.
    pub job_type: Option<String>,
    /// Only the live job holding this unique key (finished jobs keep their
    /// key, but only live ones are indexed by it).
    pub unique_key: Option<String>,
    /// Only jobs carrying this tag ([`crate::JobOptions::tag`]); newest
    /// first only, searched a window of [`SEARCH_WINDOW`] tagged jobs at a
    /// time (the untagged ones are never read).
    pub tag: Option<String>,
    /// The order.
    pub order: JobOrder,
    /// Where the page starts (none: the first page).
    pub cursor: Option<JobCursor>,
}

/// One page of jobs, and where the next one starts.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct JobPage {
    /// The jobs, in the query's order.
    pub jobs: Vec<JobRow>,
    /// The next page's cursor, if there are more.
    pub next: Option<JobCursor>,
    /// The search stopped at the end of its window ([`SEARCH_WINDOW`] jobs)
    /// before the page filled: older jobs were not searched; this cursor
    /// searches on from there.
    pub searched_to: Option<JobCursor>,
}

/// The most jobs a search that no index serves reads for one page.
pub const SEARCH_WINDOW: i64 = 100_000;

impl JobQuery {
    /// Whether an index serves this query's filters, or its search must be
    /// windowed: newest first with a queue or type among all or finished
    /// jobs, or with a tag (a live status, a unique key or no filter at all
    /// are indexed; the tags index finds a tag's jobs, but not newest
    /// first, so a common tag would read every job that carries it).
    fn windowed(&self) -> bool {
        self.order == JobOrder::Newest
            && self.unique_key.is_none()
            && (self.tag.is_some()
                || (self.status.is_none_or(JobStatus::is_finished)
                    && (self.queue.is_some() || self.job_type.is_some() || self.status.is_some())))
    }
}

#[derive(QueryableByName)]
struct Floor {
    #[diesel(sql_type = Uuid)]
    id: JobId,
}

/// The floor of the search window of `query` below `before` (none: fewer
/// jobs left): of every job, or of the tagged jobs only when it selects a
/// tag.
fn window_floor(
    conn: &mut PgConnection,
    query: &JobQuery,
    before: Option<JobId>,
) -> Result<Option<JobId>> {
    let statement = if query.tag.is_some() {
        sql::JOB_WINDOW_FLOOR_TAGGED
    } else {
        sql::JOB_WINDOW_FLOOR
    };
    Ok(diesel::sql_query(statement)
        .bind::<Nullable<Uuid>, _>(before)
        .bind::<BigInt, _>(SEARCH_WINDOW)
        .get_result::<Floor>(conn)
        .optional()?
        .map(|floor| floor.id))
}

impl JobQuery {
    /// Checks the filters: names and unique keys as the queue accepts
    /// them, and `RunAt` only with a live status.
    pub fn validate(&self) -> Result<()> {
        if let Some(queue) = &self.queue {
            limits::check_queue(queue)?;
        }
        if let Some(job_type) = &self.job_type {
            limits::check_job_type(job_type)?;
        }
        if let Some(key) = &self.unique_key {
            limits::check_unique_key(key)?;
        }
        if let Some(tag) = &self.tag {
            limits::check_tags(std::slice::from_ref(tag))?;
            if self.order != JobOrder::Newest {
                return Err(Error::invalid(
                    "order",
                    "a tag's jobs are listed newest first only: no index holds them by run_at \
                     or by when they finished (leave the order at newest first)",
                ));
            }
        }
        if self.order == JobOrder::RunAt && self.status.is_none_or(|s| s.is_finished()) {
            return Err(Error::invalid(
                "order",
                "ordering by run_at needs a live status (waiting, scheduled, pending, \
                 unhandled, claimed or running): the finished history has no index by run_at",
            ));
        }
        if self.order == JobOrder::Finished && !self.status.is_some_and(|s| s.is_finished()) {
            return Err(Error::invalid(
                "order",
                "ordering by when jobs finished needs a finished status (completed, failed or \
                 cancelled)",
            ));
        }
        Ok(())
    }
}

#[derive(QueryableByName)]
struct Counted {
    #[diesel(sql_type = BigInt)]
    n: i64,
}

/// A page of at most `limit` (1 to 500) jobs matching `query`.
pub fn browse_jobs(conn: &mut PgConnection, query: &JobQuery, limit: i64) -> Result<JobPage> {
    query.validate()?;
    if !(1..=500).contains(&limit) {
        return Err(Error::invalid(
            "limit",
            format!("{limit} is out of range (1 to 500)"),
        ));
    }
    let (before, at, at_id) = match query.cursor {
        None => (None, None, None),
        Some(JobCursor::Before(id)) => (Some(id), None, None),
        Some(JobCursor::After(at, id) | JobCursor::FinishedBefore(at, id)) => {
            (None, Some(at), Some(id))
        }
    };
    let floor = if query.windowed() {
        window_floor(conn, query, before)?
    } else {
        None
    };
    // One more than the page: whether there is a next one.
    let mut jobs = report(conn, |conn| {
        let filtered = |statement: &'static str| {
            diesel::sql_query(statement)
                .bind::<Nullable<Text>, _>(query.status.map(JobStatus::as_str))
                .bind::<Nullable<Text>, _>(query.queue.clone())
                .bind::<Nullable<Text>, _>(query.job_type.clone())
                .bind::<Nullable<Text>, _>(query.unique_key.clone())
        };
        let tag = || query.tag.clone();
        Ok(match query.order {
            JobOrder::Newest => filtered(sql::JOB_BROWSE_NEWEST)
                .bind::<Nullable<Uuid>, _>(before)
                .bind::<BigInt, _>(limit + 1)
                .bind::<Nullable<Uuid>, _>(floor)
                .bind::<Nullable<Text>, _>(tag())
                .load::<JobRow>(conn)?,
            JobOrder::RunAt => filtered(sql::JOB_BROWSE_RUN_AT)
                .bind::<Nullable<Timestamptz>, _>(at)
                .bind::<Nullable<Uuid>, _>(at_id)
                .bind::<BigInt, _>(limit + 1)
                .bind::<Nullable<Text>, _>(tag())
                .load::<JobRow>(conn)?,
            JobOrder::Finished => filtered(sql::JOB_BROWSE_FINISHED)
                .bind::<Nullable<Timestamptz>, _>(at)
                .bind::<Nullable<Uuid>, _>(at_id)
                .bind::<BigInt, _>(limit + 1)
                .bind::<Nullable<Text>, _>(tag())
                .load::<JobRow>(conn)?,
        })
    })?;
    let more = jobs.len() as i64 > limit;
    jobs.truncate(limit as usize);
    let next = match (more, jobs.last()) {
        (true, Some(last)) => Some(match query.order {
            JobOrder::Newest => JobCursor::Before(last.id),
            JobOrder::RunAt => JobCursor::After(last.run_at, last.id),
            JobOrder::Finished => {
                JobCursor::FinishedBefore(last.finished_at.unwrap_or(last.created_at), last.id)
            }
        }),
        _ => None,
    };
    let searched_to = match (next, floor) {
        (None, Some(floor)) => Some(JobCursor::Before(floor)),
        _ => None,
    };
    Ok(JobPage {
        jobs,
        next,
        searched_to,
    })
}

/// A count that stops at a bound.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct BoundedCount {
    /// The jobs counted, at most the bound.
    pub n: i64,
    /// There are more than `n`: the count stopped at its bound.
    pub capped: bool,
    /// Only the latest [`SEARCH_WINDOW`] jobs were counted (no index
    /// serves the filters; see [`JobPage::searched_to`]).
    pub windowed: bool,
}

/// How many jobs match `query`'s filters (its order and cursor aside),
/// counting at most `bound` (and, when no index serves the filters, among
/// the latest [`SEARCH_WINDOW`] jobs only).
pub fn count_jobs(conn: &mut PgConnection, query: &JobQuery, bound: i64) -> Result<BoundedCount> {
    let unordered = JobQuery {
        order: JobOrder::Newest,
        cursor: None,
        ..query.clone()
    };
    unordered.validate()?;
    let floor = if unordered.windowed() {
        window_floor(conn, &unordered, None)?
    } else {
        None
    };
    let n = report(conn, |conn| {
        Ok(diesel::sql_query(sql::JOB_COUNT_BOUNDED)
            .bind::<Nullable<Text>, _>(query.status.map(JobStatus::as_str))
            .bind::<Nullable<Text>, _>(query.queue.as_deref())
            .bind::<Nullable<Text>, _>(query.job_type.as_deref())
            .bind::<Nullable<Text>, _>(query.unique_key.as_deref())
            .bind::<BigInt, _>(bound + 1)
            .bind::<Nullable<Uuid>, _>(floor)
            .bind::<Nullable<Text>, _>(query.tag.as_deref())
            .get_result::<Counted>(conn)?
            .n)
    })?;
    Ok(BoundedCount {
        n: n.min(bound),
        capped: n > bound,
        windowed: floor.is_some(),
    })
}

/// Deletes a finished (completed, failed or cancelled) job.
///
/// [`Error::NotFound`] if there is no such job; [`Error::WrongStatus`] if
/// it is not finished (cancel it first).
///
/// The end of a workflow step is settled first, if nothing settled it yet
/// (its row is what the settling reads): the steps after it go as its
/// workflow says before the row goes.
pub fn delete_finished_job(conn: &mut PgConnection, id: JobId) -> Result<()> {
    let deleted = read_committed(conn, |conn| {
        crate::workflow_release::settle_ended_of(conn, &[id])?;
        Ok(diesel::sql_query(sql::JOB_DELETE_FINISHED)
            .bind::<Uuid, _>(id)
            .execute(conn)?)
    })?;
    if deleted == 1 {
        return Ok(());
    }
    match crate::row::read_job(conn, id)? {
        None => Err(Error::NotFound(id)),
        Some(job) => Err(Error::WrongStatus {
            job_id: id,
            status: job.status,
            expected: "only finished jobs can be deleted (cancel a live one first)",
        }),
    }
}

/// The most failed and cancelled jobs [`throughput`] reads (completed ones
/// are counted as they complete, not read).
pub const THROUGHPUT_MOST: i64 = 200_000;

/// Jobs finished in one minute.
#[derive(Debug, Clone, Copy, PartialEq, Eq, QueryableByName)]
#[non_exhaustive]
pub struct MinuteCount {
    /// The minute's start.
    #[diesel(sql_type = Timestamptz)]
    pub minute: DateTime<Utc>,
    /// Jobs that finished in it (completed, failed or cancelled).
    #[diesel(sql_type = BigInt)]
    pub finished: i64,
    /// Of those, completed ones.
    #[diesel(sql_type = BigInt)]
    pub completed: i64,
    /// Of those, failed ones (for good: the dead letter).
    #[diesel(sql_type = BigInt)]
    pub failed: i64,
}

/// Finished, completed and failed jobs per minute over the last hour, oldest minute
/// first (minutes without any are absent), and whether the count of failed
/// and cancelled jobs stopped at [`THROUGHPUT_MOST`] (then only the latest
/// minutes are complete). Completed jobs are counted as they complete, so
/// they are in it whether their rows are kept or not.
pub fn throughput(conn: &mut PgConnection) -> Result<(Vec<MinuteCount>, bool)> {
    let minutes = report(conn, |conn| {
        Ok(diesel::sql_query(sql::JOB_THROUGHPUT)
            .bind::<BigInt, _>(THROUGHPUT_MOST)
            .load::<MinuteCount>(conn)?)
    })?;
    // Completed jobs come from their counts; only failed and cancelled
    // ones are read row by row, up to the cap.
    let read: i64 = minutes.iter().map(|m| m.finished - m.completed).sum();
    Ok((minutes, read >= THROUGHPUT_MOST))
}
