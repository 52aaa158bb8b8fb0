//! Setting aside a queue's backlog of a job type no runner at hand
//! handles, a batch at a time, so that claims stop meeting it.

use chrono::{DateTime, Utc};
use diesel::prelude::*;
use diesel::sql_types::{BigInt, Integer, Nullable, Text, Timestamptz};

use crate::claim::Resume;
use crate::isolation::{Scope, scoped};
use crate::{JobId, Result, limits, sql};

/// What a pass of [`set_aside_due`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SetAside {
    /// Jobs set aside (or cancelled: their cancellation was asked for).
    pub jobs: i64,
    /// Where the next pass goes on: just after the last job this one set
    /// aside, in the queue's claim order; `None` when it set aside none.
    pub next: Option<Resume>,
}

#[derive(QueryableByName)]
struct Place {
    #[diesel(sql_type = Integer)]
    priority: i32,
    #[diesel(sql_type = Timestamptz)]
    run_at: DateTime<Utc>,
    #[diesel(sql_type = diesel::sql_types::Uuid)]
    id: uuid::Uuid,
}

/// Sets aside as [`crate::JobStatus::Unhandled`] up to `limit` due jobs of
/// `queue` whose type is `job_type`, in claim order from `after` (a point
/// an earlier pass returned; `None`: from the queue's start), for `runner`
/// (named in each job's error). A job whose cancellation was asked for is
/// cancelled instead. A runner does this, a batch per pass, when its claims
/// meet a type it has no handler for: until then every claim of the queue
/// would meet its backlog. `engine::reclaim_unhandled` takes them
/// back once a runner that handles the type runs.
///
/// Jobs that sort before `after` are left to the claims, which set aside
/// those they meet. Safe beside claims and other passes (SKIP LOCKED).
pub fn set_aside_due(
    conn: &mut PgConnection,
    queue: &str,
    job_type: &str,
    after: Option<&Resume>,
    limit: i64,
    runner: &str,
) -> Result<SetAside> {
    set_aside_due_in(conn, Scope::Own, (queue, job_type), after, limit, runner)
}

pub(crate) fn set_aside_due_in(
    conn: &mut PgConnection,
    scope: Scope,
    (queue, job_type): (&str, &str),
    after: Option<&Resume>,
    limit: i64,
    runner: &str,
) -> Result<SetAside> {
    limits::check_batch(limit)?;
    limits::check_queue(queue)?;
    limits::check_job_type(job_type)?;
    let places = scoped(conn, scope, sql::READ_COMMITTED_BEGIN, |conn| {
        Ok(diesel::sql_query(sql::JOB_SET_ASIDE_DUE)
            .bind::<Text, _>(queue)
            .bind::<Text, _>(job_type)
            .bind::<Nullable<Integer>, _>(after.map(|p| p.priority))
            .bind::<Nullable<Timestamptz>, _>(after.map(|p| p.run_at))
            .bind::<Nullable<diesel::sql_types::Uuid>, _>(after.map(|p| p.id.as_uuid()))
            .bind::<BigInt, _>(limit)
            .bind::<Text, _>(runner)
            .load::<Place>(conn)?)
    })?;
    let next = places
        .iter()
        .map(|place| Resume {
            queue: queue.to_owned(),
            priority: place.priority,
            run_at: place.run_at,
            id: JobId::from(place.id),
        })
        .reduce(|last, point| if last.is_before(&point) { point } else { last });
    Ok(SetAside {
        jobs: places.len() as i64,
        next,
    })
}

impl crate::session::QueueSession {
    /// [`set_aside_due`], in one round trip.
    pub fn set_aside_due(
        &mut self,
        (queue, job_type): (&str, &str),
        after: Option<&crate::claim::Resume>,
        limit: i64,
        runner: &str,
    ) -> Result<SetAside> {
        set_aside_due_in(
            self.conn(),
            Scope::Session,
            (queue, job_type),
            after,
            limit,
            runner,
        )
    }
}
