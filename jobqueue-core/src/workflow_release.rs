//! The release of workflow steps: a completion that settles the edges out
//! of its steps in the same statement, and the sweep that settles the ends
//! no completion saw (failed for good, cancelled).

use std::time::Duration;

use diesel::prelude::*;
use diesel::sql_types::{Array, BigInt, Double, Integer, Nullable, Text, Uuid};

use crate::finish::run_fenced;
use crate::isolation::Scope;
use crate::lease::{Fenced, Lease};
use crate::prepared::{Prepared, Statement, prepared};
use crate::{Error, JobId, Result, sql};

/// Most bytes of a step's result (its JSON text).
pub const MAX_RESULT_BYTES: usize = 64 * 1024;

/// Steps one round of [`settle_ended`] settles at most.
pub const DEFAULT_SETTLE_BATCH: i64 = 1_000;

/// One completed workflow job: its lease and the result its handler
/// recorded (JSON text, at most [`MAX_RESULT_BYTES`]), if any.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StepDone {
    /// The lease it was worked under.
    pub lease: Lease,
    /// Its result, JSON text.
    pub result: Option<String>,
}

impl StepDone {
    /// A job completed under `lease` with no result.
    pub fn new(lease: Lease) -> Self {
        StepDone {
            lease,
            result: None,
        }
    }
}

/// Completes one held job; [`Error::LeaseLost`] (and no change) if it is no
/// longer held under `lease`'s token. A step of a workflow releases the
/// steps after it in the same statement (with no result; see
/// [`complete_steps_many`] for one).
pub fn complete(conn: &mut PgConnection, lease: &Lease) -> Result<()> {
    complete_step(conn, &StepDone::new(*lease), false)
}

/// [`complete`], deleting the row ([`crate::finish::complete_and_delete_many`]).
pub fn complete_and_delete(conn: &mut PgConnection, lease: &Lease) -> Result<()> {
    complete_step(conn, &StepDone::new(*lease), true)
}

/// Checks a step's result before it is recorded: JSON text of at most
/// [`MAX_RESULT_BYTES`].
pub fn check_result(result: &str) -> Result<()> {
    if result.len() > MAX_RESULT_BYTES {
        return Err(Error::invalid(
            "result",
            format!(
                "{} bytes of JSON; a job's result holds at most {MAX_RESULT_BYTES}: \
                 store large outputs elsewhere and record where they are",
                result.len()
            ),
        ));
    }
    crate::limits::check_storable("result", result)
}

/// The completion of `done` (workflow jobs all), bound: ids and tokens
/// sorted by id, results in the same order, the notify channel.
pub(crate) fn steps_query<S: Statement>(done: &[StepDone]) -> Prepared<'static, S> {
    let mut sorted: Vec<&StepDone> = done.iter().collect();
    sorted.sort_unstable_by_key(|step| step.lease.job_id);
    prepared::<S>()
        .bind::<Array<Uuid>, _>(
            sorted
                .iter()
                .map(|step| step.lease.job_id)
                .collect::<Vec<_>>(),
        )
        .bind::<Array<Integer>, _>(
            sorted
                .iter()
                .map(|step| step.lease.token)
                .collect::<Vec<_>>(),
        )
        .bind::<Array<Nullable<Text>>, _>(
            sorted
                .iter()
                .map(|step| step.result.clone())
                .collect::<Vec<_>>(),
        )
        .bind::<Text, _>(crate::enqueue::NOTIFY_CHANNEL)
}

/// Completes held workflow jobs, recording their results and releasing
/// the steps that waited only for them, in one statement: a step's
/// children are released exactly when its completion commits. `delete`
/// deletes the completed rows (a retention of zero), as
/// `engine::complete_and_delete_many` does; the steps keep what
/// their children need.
pub fn complete_steps_many(
    conn: &mut PgConnection,
    done: &[StepDone],
    delete: bool,
) -> Result<Fenced> {
    complete_steps_in(conn, Scope::Own, done, delete)
}

/// Completes one held job, a step of a workflow or not, with its result
/// (see [`complete_steps_many`]); [`Error::LeaseLost`] (and no change) if it
/// is no longer held under its lease's token.
pub fn complete_step(conn: &mut PgConnection, done: &StepDone, delete: bool) -> Result<()> {
    let fenced = complete_steps_many(conn, std::slice::from_ref(done), delete)?;
    crate::finish::single(&done.lease, fenced)
}

pub(crate) fn complete_steps_in(
    conn: &mut PgConnection,
    scope: Scope,
    done: &[StepDone],
    delete: bool,
) -> Result<Fenced> {
    let leases: Vec<Lease> = done.iter().map(|step| step.lease).collect();
    if delete {
        run_fenced(
            conn,
            scope,
            &leases,
            steps_query::<sql::JobCompleteDeleteStepsMany>(done),
        )
    } else {
        run_fenced(
            conn,
            scope,
            &leases,
            steps_query::<sql::JobCompleteStepsMany>(done),
        )
    }
}

/// What [`settle_ended`] did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Settled {
    /// Steps whose failure or cancellation it settled.
    pub ended: i64,
    /// Steps it cancelled because a step they waited for did not complete
    /// (under [`crate::OnFailure::Cancel`]).
    pub cancelled: i64,
    /// Live steps it looked at.
    pub looked: i64,
    /// Where the sweep goes on from: the last step of a full page
    /// ([`settle_ended_page`]); `None` once it reached the last live step.
    pub next: Option<JobId>,
}

#[derive(QueryableByName)]
struct SettleRow {
    #[diesel(sql_type = BigInt)]
    ended: i64,
    #[diesel(sql_type = Array<Uuid>)]
    cancelled: Vec<JobId>,
    #[diesel(sql_type = Array<Uuid>)]
    deferred: Vec<JobId>,
    #[diesel(sql_type = BigInt)]
    paged: i64,
    #[diesel(sql_type = Nullable<Uuid>)]
    last: Option<JobId>,
}

/// One round of [`sql::WORKFLOW_SETTLE_ENDED`]: of a page of up to `batch`
/// live steps after `after` and of the steps whose jobs ended within
/// `recent` (up to [`DEFAULT_SETTLE_BATCH`]), or of the steps of `ids`.
fn settle_round(
    conn: &mut PgConnection,
    batch: i64,
    ids: Option<&[JobId]>,
    after: Option<JobId>,
    recent: Option<Duration>,
) -> Result<SettleRow> {
    Ok(diesel::sql_query(sql::WORKFLOW_SETTLE_ENDED)
        .bind::<BigInt, _>(batch.max(1))
        .bind::<Text, _>(crate::enqueue::NOTIFY_CHANNEL)
        .bind::<Nullable<Array<Uuid>>, _>(ids)
        .bind::<Nullable<Uuid>, _>(after)
        .bind::<Nullable<Double>, _>(recent.map(|within| within.as_secs_f64()))
        .bind::<BigInt, _>(DEFAULT_SETTLE_BATCH)
        .get_result::<SettleRow>(conn)?)
}

/// Settles the workflow steps whose jobs failed for good or were cancelled
/// (by a handler, an operator, a rescue of an expired lease), as their
/// workflows' [`crate::OnFailure`] says: every live step, a page of up to
/// `batch` at a time ([`settle_ended_page`]), until the last. Each step is
/// settled once, whichever runner sweeps. It reads every step not ended
/// yet: the repair of what no one settled where it happened
/// ([`settle_ended_of`]); a runner's maintenance reads a few pages per pass
/// instead, going on where the pass before stopped.
pub fn settle_ended(conn: &mut PgConnection, batch: i64) -> Result<Settled> {
    let mut total = Settled::default();
    loop {
        let page = settle_ended_page(conn, total.next, batch, None)?;
        total.ended += page.ended;
        total.cancelled += page.cancelled;
        total.looked += page.looked;
        total.next = page.next;
        if total.next.is_none() {
            return Ok(total);
        }
    }
}

/// One page of [`settle_ended`]: looks at up to `batch` live steps after
/// `after` (from the first if `None`), in id order, and, with `recent`, at
/// the live steps whose jobs failed or were cancelled within it (up to
/// [`DEFAULT_SETTLE_BATCH`]: what changed lately); settles those that
/// ended, and the steps it cancels after them, down the graph
/// ([`settle_ended_of`]). Its [`Settled::next`] is where the next page
/// starts. A page costs `batch` steps and what ended lately, however many
/// steps are live.
pub fn settle_ended_page(
    conn: &mut PgConnection,
    after: Option<JobId>,
    batch: i64,
    recent: Option<Duration>,
) -> Result<Settled> {
    let row = settle_round(conn, batch, None, after, recent)?;
    let mut then: Vec<JobId> = row.cancelled.clone();
    then.extend(row.deferred);
    let after_them = settle_ended_of(conn, &then)?;
    Ok(Settled {
        ended: row.ended + after_them.ended,
        cancelled: row.cancelled.len() as i64 + after_them.cancelled,
        looked: row.paged,
        next: (row.paged >= batch.max(1)).then_some(row.last).flatten(),
    })
}

/// [`settle_ended`] of the steps of `ids` (jobs that just failed or were
/// cancelled; those of them that are no such steps are passed over), and
/// of the steps it cancels after them, down the graph (and those a round
/// deferred to the next): reads only those.
pub fn settle_ended_of(conn: &mut PgConnection, ids: &[JobId]) -> Result<Settled> {
    let mut total = Settled::default();
    let mut round: Vec<JobId> = ids.to_vec();
    while !round.is_empty() {
        let batch = i64::try_from(round.len()).unwrap_or(i64::MAX);
        let row = settle_round(conn, batch, Some(&round), None, None)?;
        total.ended += row.ended;
        total.cancelled += row.cancelled.len() as i64;
        round = row.cancelled;
        round.extend(row.deferred);
    }
    Ok(total)
}

impl crate::session::QueueSession {
    /// [`complete_steps_many`], in one round trip.
    pub fn complete_steps_many(&mut self, done: &[StepDone], delete: bool) -> Result<Fenced> {
        complete_steps_in(self.conn(), Scope::Session, done, delete)
    }

    /// [`settle_ended_page`].
    pub fn settle_ended_page(
        &mut self,
        after: Option<crate::JobId>,
        batch: i64,
        recent: Option<std::time::Duration>,
    ) -> Result<Settled> {
        settle_ended_page(self.conn(), after, batch, recent)
    }

    /// [`settle_ended_of`].
    pub fn settle_ended_of(&mut self, ids: &[crate::JobId]) -> Result<Settled> {
        settle_ended_of(self.conn(), ids)
    }
}
