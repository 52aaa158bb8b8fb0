//! Claiming due jobs: one statement, `FOR UPDATE SKIP LOCKED`.

use std::cmp::Reverse;
use std::time::Duration;

use chrono::{DateTime, Utc};
use diesel::prelude::*;
use diesel::sql_types::{Array, BigInt, Double, Integer, Nullable, Text, Timestamptz};

use crate::isolation::{Scope, in_transaction, scoped};
use crate::prepared::{Prepared, Statement, prepared};
use crate::{Error, JobId, JobRow, Result, limits, sql};

/// The most queues a claim of every queue takes jobs from (see
/// [`Claim::start_after`]). A claim that took jobs from this many queues
/// may have left others with due jobs even when it took fewer than its
/// limit: claim again at once rather than wait for new jobs.
pub const MAX_CLAIM_QUEUES: i64 = 100;

/// Default lease: how long a claim holds a job without a heartbeat.
pub const DEFAULT_LEASE: Duration = Duration::from_secs(30);

/// What to claim, and for whom.
///
/// A claim takes due jobs of its queues, whatever their type: queues are
/// the unit of routing. A runner that claims a job it has no handler for
/// sets it aside as [`crate::JobStatus::Unhandled`] (see [`crate::finish::park_many`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Claim {
    /// Who claims: stored on the row while it is held.
    pub worker_id: String,
    /// Queues to claim from; empty means every queue. The claim's jobs are
    /// split evenly among the queues that have due jobs; within a queue,
    /// highest priority first.
    pub queues: Vec<String>,
    /// Most jobs to claim at once. Default 10.
    pub limit: i64,
    /// How long the claim holds each job without a heartbeat. Default 30 s.
    pub lease: Duration,
    /// At most this many jobs of a queue in this claim, by queue (a
    /// runner's own per-queue concurrency); queues not named take their
    /// even share of `limit`.
    pub queue_limits: Vec<(String, i64)>,
    /// How the claim treats queues with a global limit
    /// (`jobqueue queue limit`). Default [`GlobalLimits::Honour`].
    pub global_limits: GlobalLimits,
    /// Where to resume in some of the named queues (at most one point per
    /// queue; ignored by a claim of every queue). See [`Resume`].
    pub resume: Vec<Resume>,
    /// A claim of every queue starts its search for queues with due jobs
    /// after this queue name (empty: at the first), goes on in name order,
    /// wraps around, and stops once it found `limit` queues it may claim
    /// from, or [`MAX_CLAIM_QUEUES`] (then each gives a larger share): its cost
    /// grows with `limit`, not with the number of queues.
    /// Claims that each start after the last queue the one before took
    /// from ([`Claim::rotate`]) go round every queue in turn. Ignored by a
    /// claim of named queues.
    pub start_after: String,
    /// The job types the claimer has handlers for; empty (the default):
    /// every type is claimed. Due jobs of other types that the claim
    /// meets are set aside as [`JobStatus::Unhandled`](crate::JobStatus)
    /// by the claim itself (cancelled instead if a cancellation was asked
    /// for) and returned with that status, not claimed: the caller must
    /// not run them. See `set_aside_due` for a queue's whole backlog.
    pub handled_types: Vec<String>,
    /// Job types the claimer has no handler for but another live runner of
    /// its queues has (see `types_handled_elsewhere`): their due jobs are
    /// neither claimed nor set aside, but left for that runner. Without
    /// it, runners of one queue with different handlers (a rolling deploy
    /// that adds a type) set each other's jobs aside and take them back,
    /// over and over.
    pub handled_elsewhere: Vec<String>,
    /// At most this many jobs of each queue with a rate limit in this claim
    /// (`None`, the default: as many as its limit leaves): a runner claims
    /// no more of them than its free workers start at once, so that a
    /// handler starts within moments of its claim, which is what the rate
    /// limit counts (see [`crate::RateLimit`]).
    pub rate_limited_most: Option<i64>,
    /// How much later than a rate limit's margin after the claim this
    /// claimer's handlers may start (its claims' round trip, and the hand-off
    /// to a worker): a claim of a rate-limited queue counts its starts that
    /// much longer. Default zero.
    pub start_delay: Duration,
}

/// A resume point: the position, in one queue's claim order (priority,
/// then `run_at`, then id), of the last job an earlier claim took from it.
///
/// A claim of a queue with a resume point leaves out the due jobs of the
/// point's priority that sort before it, and so does not read the index
/// entries there. That is where the claim index keeps the old versions of
/// the jobs claimed since the oldest open snapshot began: while a long
/// transaction holds the xmin horizon, nothing can remove them, and a
/// claim from the start of the queue reads every one (see the guide's
/// runner chapter, `docs/src/runner.md`, "long transactions"). Jobs of
/// higher priorities are still found from the start of the queue, and
/// jobs after the point and of lower priorities as always. A job that sorts before the point at its
/// priority (a retry or a scheduled job that came due with an older
/// `run_at`, a job another claimer skipped) is left for a claim with an
/// earlier point or none: the runner moves its points back to the first
/// due job `queue_head` finds, every look.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Resume {
    /// The queue.
    pub queue: String,
    /// The job's priority.
    pub priority: i32,
    /// The job's `run_at`.
    pub run_at: DateTime<Utc>,
    /// The job's id.
    pub id: JobId,
}

impl Resume {
    /// The resume point just after `row` (a job a claim took).
    pub fn after(row: &JobRow) -> Self {
        Resume {
            queue: row.queue.clone(),
            priority: row.priority,
            run_at: row.run_at,
            id: row.id,
        }
    }

    /// Whether this point comes before `other` in their queue's claim
    /// order (higher priority first, then earlier `run_at`, then lower id).
    /// Points of different queues are not ordered: false.
    pub fn is_before(&self, other: &Resume) -> bool {
        self.queue == other.queue
            && (self.priority, Reverse(self.run_at), Reverse(self.id))
                > (other.priority, Reverse(other.run_at), Reverse(other.id))
    }
}

/// How a claim treats queues that have a global limit (a cap on the jobs of
/// the queue held at once by all runners together) or a rate limit (a cap
/// on the jobs of the queue started per period).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum GlobalLimits {
    /// The claim's statement locks those queues' rows first (those with
    /// due jobs), takes from each at most what its limits leave, and notes
    /// what it took on them. A queue whose held jobs must be counted again
    /// costs a short transaction of two more statements and a second claim,
    /// only when the first came back short (see [`claim`]). Inside a
    /// caller's transaction at another isolation level than READ
    /// COMMITTED, limited queues are left out instead.
    #[default]
    Honour,
    /// Limited queues are left out of this claim (never over their
    /// limits), and the claim does not look for them. For a caller that
    /// knows none of its queues has a limit.
    Skip,
}

impl Claim {
    /// A claim for `worker_id` of up to 10 jobs of any type from any queue.
    pub fn new(worker_id: impl Into<String>) -> Self {
        Claim {
            worker_id: worker_id.into(),
            queues: Vec::new(),
            limit: 10,
            lease: DEFAULT_LEASE,
            queue_limits: Vec::new(),
            global_limits: GlobalLimits::Honour,
            resume: Vec::new(),
            start_after: String::new(),
            handled_types: Vec::new(),
            handled_elsewhere: Vec::new(),
            rate_limited_most: None,
            start_delay: Duration::ZERO,
        }
    }

    /// Resume the claim of each named queue that has a point in `points`
    /// there (see [`Resume`]).
    pub fn resume_at(mut self, points: impl IntoIterator<Item = Resume>) -> Self {
        self.resume = points.into_iter().collect();
        self
    }

    /// At most `limit` jobs of `queue` in this claim (a queue limited twice
    /// keeps the lower limit).
    pub fn queue_limit(mut self, queue: impl Into<String>, limit: i64) -> Self {
        self.cap_queue(&queue.into(), limit);
        self
    }

    /// Lowers `queue`'s limit in this claim to `limit`, or sets it if it has
    /// none.
    pub fn cap_queue(&mut self, queue: &str, limit: i64) {
        match self.queue_limits.iter_mut().find(|(q, _)| q == queue) {
            Some(entry) => entry.1 = entry.1.min(limit),
            None => self.queue_limits.push((queue.to_owned(), limit)),
        }
    }

    /// Moves [`start_after`](Self::start_after) past the queues `rows`
    /// (what this claim took) came from, in the order the claim went
    /// round them: the next claim starts with the queues after them. A
    /// claim that took nothing starts the next from the first queue.
    pub fn rotate(&mut self, rows: &[JobRow]) {
        let start = std::mem::take(&mut self.start_after);
        // Queues after the start come first in the claim's order, then the
        // queues it wrapped around to (those up to the start).
        let wrapped = rows
            .iter()
            .map(|row| &row.queue)
            .filter(|q| **q <= start)
            .max();
        let last = wrapped.or_else(|| rows.iter().map(|row| &row.queue).max());
        if let Some(last) = last {
            self.start_after.clone_from(last);
        }
    }

    /// See [`GlobalLimits`].
    pub fn global_limits(mut self, global_limits: GlobalLimits) -> Self {
        self.global_limits = global_limits;
        self
    }

    /// Only from these queues (a name given twice counts once).
    pub fn queues<S: Into<String>>(mut self, queues: impl IntoIterator<Item = S>) -> Self {
        let mut queues: Vec<String> = queues.into_iter().map(Into::into).collect();
        queues.sort_unstable();
        queues.dedup();
        self.queues = queues;
        self
    }

    /// Claims only jobs of these types, and sets aside the others it meets
    /// (see [`handled_types`](Self::handled_types)).
    pub fn handled_types<S: Into<String>>(mut self, types: impl IntoIterator<Item = S>) -> Self {
        self.handled_types = types.into_iter().map(Into::into).collect();
        self
    }

    /// At most `most` jobs of each rate-limited queue (see
    /// [`rate_limited_most`](Self::rate_limited_most)).
    pub fn rate_limited_most(mut self, most: i64) -> Self {
        self.rate_limited_most = Some(most);
        self
    }

    /// At most `limit` jobs.
    pub fn limit(mut self, limit: i64) -> Self {
        self.limit = limit;
        self
    }

    /// Hold each job for `lease` without a heartbeat.
    pub fn lease(mut self, lease: Duration) -> Self {
        self.lease = lease;
        self
    }

    pub(crate) fn validate(&self) -> Result<()> {
        if self.worker_id.is_empty() || self.worker_id.len() > 200 || self.worker_id.contains('\0')
        {
            return Err(Error::invalid(
                "worker_id",
                "must be 1 to 200 bytes, without NUL",
            ));
        }
        for queue in &self.queues {
            limits::check_queue(queue)?;
        }
        for (queue, limit) in &self.queue_limits {
            limits::check_queue(queue)?;
            if *limit < 0 {
                return Err(Error::invalid(
                    "queue limit",
                    format!("{limit} for queue `{queue}` is negative"),
                ));
            }
        }
        for job_type in self.handled_types.iter().chain(&self.handled_elsewhere) {
            limits::check_job_type(job_type)?;
        }
        // `start_after` is not checked as a queue name: it comes from the
        // rows a claim took, whatever names producers stored.
        for (i, point) in self.resume.iter().enumerate() {
            limits::check_queue(&point.queue)?;
            if self.resume[..i].iter().any(|p| p.queue == point.queue) {
                return Err(Error::invalid(
                    "resume",
                    format!("queue `{}` has two resume points", point.queue),
                ));
            }
        }
        if !(1..=10_000).contains(&self.limit) {
            return Err(Error::invalid(
                "limit",
                format!("{} is out of range (1 to 10000)", self.limit),
            ));
        }
        if self.lease < Duration::from_millis(100) {
            return Err(Error::invalid(
                "lease",
                format!("{:?} is shorter than 100 ms", self.lease),
            ));
        }
        Ok(())
    }
}

/// Claims up to `claim.limit` due jobs in ONE statement and returns them,
/// highest priority first, then by `run_at`, then by id.
///
/// Each claimed row is `claimed` by `claim.worker_id`, with one more attempt
/// used, a new fencing token ([`JobRow::lease`]) and a lease of `claim.lease`
/// from the database's `now()`. Concurrent claimers never get the same job.
/// The claim's cost depends on its own queues' due jobs only: other queues'
/// backlogs, scheduled jobs and set-aside jobs are not in its index range.
///
/// Queues with a global or rate limit are honoured in the same statement
/// (see [`GlobalLimits`]); when one of them has to have its held jobs
/// counted again and the claim came back short, a count and a second claim
/// for the rest follow.
pub fn claim(conn: &mut PgConnection, claim: &Claim) -> Result<Vec<JobRow>> {
    Ok(claim_in(conn, Scope::Own, claim)?.rows)
}

/// What a claim took, and when a queue its rate limit held back gets room.
#[derive(Debug, Clone, Default)]
#[non_exhaustive]
pub struct Claimed {
    /// The jobs claimed (and set aside), as [`claim`] returns them.
    pub rows: Vec<JobRow>,
    /// When one of the claim's queues that has due jobs, and whose rate
    /// limit left it less than this claim could take, gets room again, from
    /// the claim: the soonest its window drops a start. `None` when no rate
    /// limit held the claim back.
    pub rate_room_in: Option<Duration>,
    /// The claim's queues that have a rate limit and whose window it left
    /// more than half full (a limit that binds, or nearly), each with how
    /// long after
    /// the claim was sent a handler of one of their jobs may start (the
    /// limit's margin, and the time the claim waited for the queues'
    /// locks), or the job be handed back unstarted (`release_many`); that is
    /// what keeps the handlers' starts, not only the claims, within the
    /// limit in every window.
    pub rate_margins: Vec<(String, Duration)>,
}

/// [`claim`], also saying when a rate limit that held it back gives room
/// again: a claimer that found nothing can sleep until then.
pub fn claim_paced(conn: &mut PgConnection, claim: &Claim) -> Result<Claimed> {
    claim_in(conn, Scope::Own, claim)
}

/// The claim statement for `claim`, bound, as `S` (one of the claims).
pub(crate) fn query<S: Statement>(claim: &Claim) -> Prepared<'_, S> {
    let (names, limits): (Vec<String>, Vec<i64>) = claim.queue_limits.iter().cloned().unzip();
    let resume = &claim.resume;
    prepared::<S>()
        .bind::<Array<Text>, _>(&claim.queues)
        .bind::<BigInt, _>(claim.limit)
        .bind::<Text, _>(&claim.worker_id)
        .bind::<Double, _>(claim.lease.as_secs_f64())
        .bind::<Array<Text>, _>(names)
        .bind::<Array<BigInt>, _>(limits)
        .bind::<Array<Text>, _>(resume.iter().map(|p| p.queue.clone()).collect::<Vec<_>>())
        .bind::<Array<Integer>, _>(resume.iter().map(|p| p.priority).collect::<Vec<_>>())
        .bind::<Array<Timestamptz>, _>(resume.iter().map(|p| p.run_at).collect::<Vec<_>>())
        .bind::<Array<diesel::sql_types::Uuid>, _>(
            resume.iter().map(|p| p.id.as_uuid()).collect::<Vec<_>>(),
        )
        .bind::<Text, _>(&claim.start_after)
        .bind::<Array<Text>, _>(&claim.handled_types)
        .bind::<BigInt, _>(MAX_CLAIM_QUEUES)
        .bind::<diesel::sql_types::Nullable<BigInt>, _>(claim.rate_limited_most)
        .bind::<Array<Text>, _>(&claim.handled_elsewhere)
        .bind::<BigInt, _>(i64::try_from(claim.start_delay.as_micros()).unwrap_or(i64::MAX))
}

pub(crate) fn claim_in(conn: &mut PgConnection, scope: Scope, claim: &Claim) -> Result<Claimed> {
    claim.validate()?;
    let mut claimed = scoped(conn, scope, sql::HOT_PATH_BEGIN, |conn| {
        match claim.global_limits {
            GlobalLimits::Skip => Ok(Claimed {
                rows: run(conn, claim)?,
                rate_room_in: None,
                rate_margins: Vec::new(),
            }),
            GlobalLimits::Honour => claim_limited(conn, claim),
        }
    })?;
    // UPDATE ... RETURNING does not keep the CTE's order.
    claimed.rows.sort_by(|a, b| {
        b.priority
            .cmp(&a.priority)
            .then(a.run_at.cmp(&b.run_at))
            .then(a.id.cmp(&b.id))
    });
    Ok(claimed)
}

/// Runs the claim statement that leaves limited queues out.
fn run(conn: &mut PgConnection, claim: &Claim) -> Result<Vec<JobRow>> {
    Ok(if claim.queues.is_empty() {
        query::<sql::JobClaimAny>(claim).load::<JobRow>(conn)?
    } else {
        query::<sql::JobClaimQueues>(claim).load::<JobRow>(conn)?
    })
}

/// A row of a claim that honours limits: a job it claimed or set aside
/// (none when it took nothing), with what it found of its limited queues.
#[derive(QueryableByName)]
struct LimitedRow {
    #[diesel(embed)]
    job: Option<JobRow>,
    /// The limited queues whose held jobs are to be counted again.
    #[diesel(sql_type = Array<Text>)]
    recount: Vec<String>,
    /// [`Claimed::rate_room_in`], in microseconds.
    #[diesel(sql_type = Nullable<BigInt>)]
    rate_room_in_micros: Option<i64>,
    /// The rate-limited queues among those it locked, and their margins in
    /// microseconds ([`Claimed::rate_margins`]).
    #[diesel(sql_type = Array<Text>)]
    rated: Vec<String>,
    #[diesel(sql_type = Array<BigInt>)]
    rated_margin_micros: Vec<i64>,
}

/// Runs the claim statement that honours limits (one statement: it locks
/// the limited queues' rows, claims within their room and notes what it
/// took); returns what it claimed and the queues to count again.
fn run_limited(conn: &mut PgConnection, claim: &Claim) -> Result<(Claimed, Vec<String>)> {
    let rows = if claim.queues.is_empty() {
        query::<sql::JobClaimAnyLimited>(claim).load::<LimitedRow>(conn)?
    } else {
        query::<sql::JobClaimQueuesLimited>(claim).load::<LimitedRow>(conn)?
    };
    // Every row carries the same values, and there is always one.
    let (recount, micros, rate_margins) = rows
        .first()
        .map(|row| {
            let margins = row
                .rated
                .iter()
                .cloned()
                .zip(
                    row.rated_margin_micros
                        .iter()
                        .map(|m| Duration::from_micros(m.max(&0).unsigned_abs())),
                )
                .collect();
            (row.recount.clone(), row.rate_room_in_micros, margins)
        })
        .unwrap_or_default();
    let claimed = Claimed {
        rows: rows.into_iter().filter_map(|row| row.job).collect(),
        rate_room_in: micros.map(|micros| Duration::from_micros(micros.max(0).unsigned_abs())),
        rate_margins,
    };
    Ok((claimed, recount))
}

/// The claim, honouring global and rate limits, in one statement (see the
/// guide's queue-control chapter): the limited queues' rows are locked so
/// that claims from them take turns, each one's part is capped at the room
/// its limits leave, and what the claim took is noted on them under the
/// lock.
///
/// A queue's held jobs are bounded from above by its last count plus what
/// claims took since; they are counted again only when that bound leaves
/// less room than this claim could take. Then, if the claim came back
/// short, the queues are counted (their rows locked first, in a
/// transaction of their own unless the caller's is open) and the rest is
/// claimed: a limit far above what is held costs no count, and one that
/// binds costs a count per claim, as it must.
fn claim_limited(conn: &mut PgConnection, claim: &Claim) -> Result<Claimed> {
    let (mut claimed, recount) = run_limited(conn, claim)?;
    let got = i64::try_from(claimed.rows.len()).unwrap_or(i64::MAX);
    if recount.is_empty() || got >= claim.limit {
        return Ok(claimed);
    }
    in_transaction(conn, sql::READ_COMMITTED_BEGIN, |conn| {
        diesel::sql_query(sql::QUEUE_LOCK_FOR_COUNT)
            .bind::<Array<Text>, _>(&recount)
            .execute(conn)?;
        diesel::sql_query(sql::QUEUE_COUNT_HELD)
            .bind::<Array<Text>, _>(&recount)
            .execute(conn)?;
        Ok(())
    })?;
    let mut rest = claim.clone();
    rest.limit = claim.limit - got;
    let (more, _) = run_limited(conn, &rest)?;
    claimed.rows.extend(more.rows);
    claimed.rate_room_in = more.rate_room_in;
    for (queue, margin) in more.rate_margins {
        if !claimed.rate_margins.iter().any(|(q, _)| *q == queue) {
            claimed.rate_margins.push((queue, margin));
        }
    }
    Ok(claimed)
}

impl crate::session::QueueSession {
    /// [`claim`], in one round trip.
    pub fn claim(&mut self, claim: &Claim) -> Result<Vec<JobRow>> {
        Ok(claim_in(self.conn(), Scope::Session, claim)?.rows)
    }

    /// [`claim_paced`], in one round trip.
    pub fn claim_paced(&mut self, claim: &Claim) -> Result<Claimed> {
        claim_in(self.conn(), Scope::Session, claim)
    }
}
