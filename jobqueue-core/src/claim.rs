//! Claiming due jobs: one statement, `FOR UPDATE SKIP LOCKED`.

use std::cmp::Reverse;
use std::time::Duration;

use chrono::{DateTime, Utc};
use diesel::prelude::*;
use diesel::sql_types::{Array, BigInt, Double, Integer, Nullable, Text, Timestamptz};

use crate::isolation::{Scope, in_transaction, scoped};
use crate::prepared::{Prepared, Statement, prepared};
use crate::{Error, JobId, JobRow, JobStatus, Result, limits, sql};

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

/// How a claim treats queues that have a global limit: a cap on the jobs of
/// the queue held at once by all runners together.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum GlobalLimits {
    /// Lock those queues' rows first, in the claim's own READ COMMITTED
    /// transaction, then claim from each at most its limit minus its jobs
    /// held anywhere (one more statement per claim while a limited queue
    /// has due jobs). Inside a caller's transaction at another isolation
    /// level, limited queues are left out instead.
    #[default]
    Honour,
    /// One statement: queues with a global limit are left out of this
    /// claim (never over their limit). For a caller that knows none of its
    /// queues has one.
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
        for job_type in &self.handled_types {
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
}

/// [`claim`], also saying when a rate limit that held it back gives room
/// again: a claimer that found nothing can sleep until then.
pub fn claim_paced(conn: &mut PgConnection, claim: &Claim) -> Result<Claimed> {
    claim_in(conn, Scope::Own, claim)
}

/// The claim statement for `claim`, bound, as `S` (one of the two claims);
/// `locked`: the limited queues whose rows the transaction locked.
pub(crate) fn query<'a, S: Statement>(claim: &'a Claim, locked: &'a [String]) -> Prepared<'a, S> {
    let (names, limits): (Vec<String>, Vec<i64>) = claim.queue_limits.iter().cloned().unzip();
    let resume = &claim.resume;
    prepared::<S>()
        .bind::<Array<Text>, _>(&claim.queues)
        .bind::<BigInt, _>(claim.limit)
        .bind::<Text, _>(&claim.worker_id)
        .bind::<Double, _>(claim.lease.as_secs_f64())
        .bind::<Array<Text>, _>(locked)
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
}

pub(crate) fn claim_in(conn: &mut PgConnection, scope: Scope, claim: &Claim) -> Result<Claimed> {
    claim.validate()?;
    let mut claimed = match (claim.global_limits, scope) {
        (GlobalLimits::Skip, _) => scoped(conn, scope, sql::HOT_PATH_BEGIN, |conn| {
            Ok(Claimed {
                rows: run(conn, claim, &[])?,
                rate_room_in: None,
            })
        })?,
        (GlobalLimits::Honour, Scope::Own) => scoped(conn, scope, sql::HOT_PATH_BEGIN, |conn| {
            claim_limited(conn, claim)
        })?,
        // The session is set up for the claim already; the lock and the
        // claim need a transaction of their own.
        (GlobalLimits::Honour, Scope::Session) => {
            in_transaction(conn, sql::READ_COMMITTED_BEGIN, |conn| {
                claim_limited(conn, claim)
            })?
        }
    };
    // UPDATE ... RETURNING does not keep the CTE's order.
    claimed.rows.sort_by(|a, b| {
        b.priority
            .cmp(&a.priority)
            .then(a.run_at.cmp(&b.run_at))
            .then(a.id.cmp(&b.id))
    });
    Ok(claimed)
}

/// Runs the claim statement.
fn run(conn: &mut PgConnection, claim: &Claim, locked: &[String]) -> Result<Vec<JobRow>> {
    Ok(if claim.queues.is_empty() {
        query::<sql::JobClaimAny>(claim, locked).load::<JobRow>(conn)?
    } else {
        query::<sql::JobClaimQueues>(claim, locked).load::<JobRow>(conn)?
    })
}

/// A limited queue's row, locked for the claim.
#[derive(QueryableByName)]
struct Limited {
    #[diesel(sql_type = Text)]
    name: String,
    #[diesel(sql_type = Nullable<Integer>)]
    global_limit: Option<i32>,
    #[diesel(sql_type = Nullable<Integer>)]
    held_counted: Option<i32>,
    #[diesel(sql_type = Integer)]
    claimed_since: i32,
    #[diesel(sql_type = Nullable<Integer>)]
    rate_starts: Option<i32>,
    #[diesel(sql_type = Nullable<BigInt>)]
    rate_micros: Option<i64>,
    #[diesel(sql_type = Array<Timestamptz>)]
    rate_at: Vec<DateTime<Utc>>,
    #[diesel(sql_type = Array<Integer>)]
    rate_jobs: Vec<i32>,
    #[diesel(sql_type = Timestamptz)]
    now_at: DateTime<Utc>,
}

impl Limited {
    /// How many jobs the queue's global limit lets this claim take, at most
    /// `limit`: its limit minus its held jobs (counted again, in
    /// `conn`'s transaction, only when the bound the row keeps leaves less
    /// room than `limit`).
    fn held_room(&self, conn: &mut PgConnection, limit: i64) -> Result<i64> {
        let Some(global_limit) = self.global_limit.map(i64::from) else {
            return Ok(limit);
        };
        let bound = self
            .held_counted
            .map(|held| i64::from(held) + i64::from(self.claimed_since));
        let held = match bound {
            Some(bound) if bound + limit <= global_limit => bound,
            _ => {
                let counted = diesel::sql_query(sql::QUEUE_COUNT_HELD)
                    .bind::<Text, _>(&self.name)
                    .get_result::<Held>(conn)?;
                counted.held_counted.map_or(global_limit, i64::from)
            }
        };
        Ok((global_limit - held).max(0))
    }

    /// How many jobs the queue's rate limit lets a claim made after
    /// `now_at` take (its starts per period minus the starts in the window
    /// that ends at `now_at`: no fewer than in the window that ends at the
    /// claim), and when the window next drops a start, from `now_at`.
    fn rate_room(&self) -> (Option<i64>, Option<Duration>) {
        let (Some(starts), Some(micros)) = (self.rate_starts, self.rate_micros) else {
            return (None, None);
        };
        let period = chrono::Duration::microseconds(micros);
        let since = self.now_at - period;
        let mut used = 0i64;
        let mut first: Option<DateTime<Utc>> = None;
        for (at, jobs) in self.rate_at.iter().zip(&self.rate_jobs) {
            if *at > since {
                used += i64::from(*jobs);
                first = Some(first.map_or(*at, |first| first.min(*at)));
            }
        }
        let room_in =
            first.map(|first| (first + period - self.now_at).to_std().unwrap_or_default());
        ((i64::from(starts) - used).max(0).into(), room_in)
    }

    /// The time a claim made at `claimed_at` is kept under in the queue's
    /// window: the end of its slot, a thousandth of the period long on a
    /// fixed grid, so that the claims of one slot share an entry and the
    /// window holds at most about a thousand. Never before `claimed_at`:
    /// a start counts no shorter than its period. (Any time without a rate
    /// limit: the entry is not kept.)
    fn window_entry(&self, claimed_at: DateTime<Utc>) -> DateTime<Utc> {
        let Some(period) = self.rate_micros else {
            return claimed_at;
        };
        let slot = (period / 1000).max(1);
        let end = (claimed_at.timestamp_micros() + slot - 1).div_euclid(slot) * slot;
        DateTime::from_timestamp_micros(end).unwrap_or(claimed_at)
    }
}

#[derive(QueryableByName)]
struct Held {
    #[diesel(sql_type = Nullable<Integer>)]
    held_counted: Option<i32>,
}

/// The claim, honouring global limits, in the caller's transaction: locks
/// the limited queues' rows (so claims from them take turns), caps each
/// one's part at its limit minus its held jobs, claims, and adds what it
/// took to their `claimed_since`.
///
/// The held jobs are bounded from above by the last count plus what was
/// claimed under the lock since (jobs only become held through such
/// claims); they are counted again only when that bound leaves less room
/// than this claim could take, so a limit far above what is held costs no
/// count.
fn claim_limited(conn: &mut PgConnection, claim: &Claim) -> Result<Claimed> {
    let limited = prepared::<sql::QueueLockLimited>()
        .bind::<Array<Text>, _>(&claim.queues)
        .load::<Limited>(conn)?;
    if limited.is_empty() {
        return Ok(Claimed {
            rows: run(conn, claim, &[])?,
            rate_room_in: None,
        });
    }
    let mut capped = claim.clone();
    let mut rate_room_in: Option<Duration> = None;
    for queue in &limited {
        let mut allowance = queue.held_room(conn, claim.limit)?;
        if let (Some(rate_room), room_in) = queue.rate_room() {
            if rate_room < claim.limit.min(allowance) {
                rate_room_in = match (rate_room_in, room_in) {
                    (Some(soonest), Some(room_in)) => Some(soonest.min(room_in)),
                    (soonest, room_in) => soonest.or(room_in),
                };
            }
            allowance = allowance.min(rate_room);
        }
        capped.cap_queue(&queue.name, allowance);
    }
    let locked: Vec<String> = limited.iter().map(|q| q.name.clone()).collect();
    let rows = run(conn, &capped, &locked)?;
    // The jobs claimed, not those set aside; every one has the claim
    // statement's time.
    let claimed = || rows.iter().filter(|row| row.status == JobStatus::Claimed);
    let Some(claimed_at) = claimed().find_map(|row| row.claimed_at) else {
        return Ok(Claimed { rows, rate_room_in });
    };
    let mut names = Vec::new();
    let mut counts = Vec::new();
    let mut entries = Vec::new();
    for queue in &limited {
        let took = claimed().filter(|row| row.queue == queue.name).count();
        if took > 0 {
            names.push(queue.name.as_str());
            counts.push(i32::try_from(took).unwrap_or(i32::MAX));
            entries.push(queue.window_entry(claimed_at));
        }
    }
    if !names.is_empty() {
        prepared::<sql::QueueNoteClaimed>()
            .bind::<Array<Text>, _>(names)
            .bind::<Array<Integer>, _>(counts)
            .bind::<Array<Timestamptz>, _>(entries)
            .bind::<Timestamptz, _>(claimed_at)
            .execute(conn)?;
    }
    Ok(Claimed { rows, rate_room_in })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limited(rate_micros: Option<i64>) -> Limited {
        Limited {
            name: "q".into(),
            global_limit: None,
            held_counted: None,
            claimed_since: 0,
            rate_starts: rate_micros.map(|_| 10),
            rate_micros,
            rate_at: Vec::new(),
            rate_jobs: Vec::new(),
            now_at: DateTime::from_timestamp_micros(0).expect("a time"),
        }
    }

    fn at(micros: i64) -> DateTime<Utc> {
        DateTime::from_timestamp_micros(micros).expect("a time")
    }

    #[test]
    fn a_claim_is_kept_at_the_end_of_its_slot_never_before_it() {
        // A period of 1 s: slots of 1 ms.
        let queue = limited(Some(1_000_000));
        assert_eq!(queue.window_entry(at(1_000_000)), at(1_000_000));
        assert_eq!(queue.window_entry(at(1_000_001)), at(1_001_000));
        assert_eq!(queue.window_entry(at(1_000_999)), at(1_001_000));
        // Claims of one slot share it; the next slot's do not, however
        // close (no chain of merges that keeps moving an entry on).
        assert_eq!(queue.window_entry(at(1_001_001)), at(1_002_000));
        // A 1 ms period has 1 µs slots; no rate limit keeps the time.
        assert_eq!(limited(Some(1_000)).window_entry(at(7)), at(7));
        assert_eq!(limited(None).window_entry(at(1_234)), at(1_234));
    }

    #[test]
    fn the_room_left_counts_the_window_ending_now_and_says_when_it_frees() {
        let mut queue = limited(Some(1_000_000));
        queue.now_at = at(10_000_000);
        queue.rate_at = vec![at(8_500_000), at(9_200_000), at(9_900_000)];
        queue.rate_jobs = vec![5, 3, 4];
        // The entry 1.5 s ago left the window: 7 of 10 used.
        let (room, room_in) = queue.rate_room();
        assert_eq!(room, Some(3));
        assert_eq!(room_in, Some(Duration::from_millis(200)));
    }
}
