//! Draining: working the due jobs inline, on the test's connection and
//! inside its transaction, as a runner would work them.

use chrono::{DateTime, Utc};
use diesel::PgConnection;
use jobqueue_core::engine::{self, Claim, DEFAULT_MAX_SNOOZES, DEFAULT_PROMOTE_BATCH};
use jobqueue_core::{Counting, JobRow, JobStatus, Result, Retention};
use jobqueue_runner::inline::{Inline, Outcome};
use jobqueue_runner::{Registry, RunnerConfig};

use crate::drained::{Drained, Ended, Stop, Worked};
use crate::write::{self, WORKER_ID, Writing};

/// Keys with waiting jobs one admission statement looks at.
const KEYS_PER_SWEEP: i64 = 1000;

/// Most jobs one claim takes (the engine's bound).
const CLAIM_MOST: usize = 10_000;

/// A drain of the due jobs: made by [`Drain::new`] with the application's
/// registry, narrowed by its options, then [`run`](Drain::run) on the
/// test's connection.
///
/// Each job goes the way a runner's job goes: claimed (from queues that
/// are not paused, highest priority first), its handler found in the
/// registry and run with a [`JobContext`](jobqueue_runner::JobContext)
/// that reaches the registry's application state, a panic caught, and its
/// outcome written with the engine's calls: completed (its row deleted
/// or kept, as the retention says), failed with its error recorded and
/// retried after the backoff while attempts remain, snoozed, cancelled,
/// or set aside as unhandled when no handler of the registry handles its
/// type. A runner's connection for handlers is the test's connection here:
/// everything stays inside the test's transaction. Inline, a job never
/// times out.
///
/// A drain works in rounds. A round claims every job due when it starts
/// (by the database's clock, which stands still inside a transaction, or
/// as of the drain's own time: [`as_of`](Drain::as_of)) and works them in
/// claim order; jobs that come due meanwhile (enqueued by its jobs, steps
/// of workflows their completions released, their retries and snoozes)
/// wait for the next round. A drain works one round
/// unless [`recursive`](Drain::recursive).
#[derive(Debug, Clone)]
#[must_use = "nothing is drained until `.run(conn)` is called"]
pub struct Drain<'r> {
    registry: &'r Registry,
    queues: Vec<String>,
    as_of: Option<DateTime<Utc>>,
    rounds: usize,
    most: Option<usize>,
    config: Option<RunnerConfig>,
}

impl<'r> Drain<'r> {
    /// A drain of every queue, one round, with `registry`'s handlers and
    /// application state, deciding as a runner with the default
    /// configuration would.
    pub fn new(registry: &'r Registry) -> Self {
        Drain {
            registry,
            queues: Vec::new(),
            as_of: None,
            rounds: 1,
            most: None,
            config: None,
        }
    }

    /// Works only jobs of `queue`; called again, of any of the queues named.
    pub fn queue(mut self, queue: impl Into<String>) -> Self {
        self.queues.push(queue.into());
        self
    }

    /// Works the jobs due by `at` too: scheduled ones (delayed, waiting
    /// out a retry's backoff or a snooze) due by then are moved to
    /// `pending` at the start of each round. Inside a transaction the
    /// database's `now()` stands still at the transaction's start, so this
    /// is how a test lets time pass (`Utc::now() + Duration::hours(1)`).
    pub fn as_of(mut self, at: DateTime<Utc>) -> Self {
        self.as_of = Some(at);
        self
    }

    /// Works up to `rounds` rounds: after the first, the jobs that came due
    /// during the one before (jobs its jobs enqueued; retries and snoozes
    /// due by [`as_of`](Self::as_of)). Stops early once nothing is due; a
    /// drain that used its last round with jobs still due says so
    /// ([`Stop::Rounds`]), which bounds a job that enqueues itself.
    pub fn recursive(mut self, rounds: usize) -> Self {
        self.rounds = rounds.max(1);
        self
    }

    /// Works at most `jobs` jobs in all ([`Stop::Jobs`] if others were
    /// still due).
    pub fn stop_after(mut self, jobs: usize) -> Self {
        self.most = Some(jobs);
        self
    }

    /// Decides as a runner configured by `config` would: its retry policy
    /// for job types that declare none, its limit of snoozes, and its
    /// retention of completed jobs (deleted by default).
    pub fn config(mut self, config: &RunnerConfig) -> Self {
        self.config = Some(config.clone());
        self
    }

    /// Drains on `conn`; errors are the database's (the jobs' own failures
    /// are outcomes, in the report).
    pub fn run(&self, conn: &mut PgConnection) -> Result<Drained> {
        // What a runner does when it starts: take back the jobs set aside
        // for want of a handler it has.
        let types: Vec<String> = self
            .registry
            .job_types()
            .into_iter()
            .map(str::to_owned)
            .collect();
        engine::reclaim_unhandled(conn, &types, &self.queues, DEFAULT_PROMOTE_BATCH)?;
        let mut jobs = Vec::new();
        for round in 1..=self.rounds {
            let room = self.most.map(|most| most.saturating_sub(jobs.len()));
            if room == Some(0) {
                break;
            }
            self.promote(conn)?;
            self.admit(conn)?;
            let claimed = self.claim_round(conn, &types, room)?;
            if claimed.is_empty() {
                return Ok(Drained {
                    jobs,
                    stop: Stop::Empty,
                });
            }
            for row in claimed {
                jobs.push(self.work(conn, row, round)?);
            }
        }
        let stop = if !self.still_due(conn)? {
            Stop::Empty
        } else if self.most.is_some_and(|most| jobs.len() >= most) {
            Stop::Jobs
        } else {
            Stop::Rounds
        };
        Ok(Drained { jobs, stop })
    }

    /// Moves the scheduled jobs due (by the drain's time, or the
    /// database's) to `pending`.
    fn promote(&self, conn: &mut PgConnection) -> Result<()> {
        loop {
            let moved = match self.as_of {
                Some(at) => engine::promote_due_by(conn, at, DEFAULT_PROMOTE_BATCH)?,
                None => engine::promote_due(conn, DEFAULT_PROMOTE_BATCH)?,
            };
            if moved < DEFAULT_PROMOTE_BATCH {
                return Ok(());
            }
        }
    }

    /// Admits the keyed jobs waiting for their key's room that it has (as a
    /// runner's completions and sweeps do): a key limited to one job at a
    /// time has one job worked per round.
    fn admit(&self, conn: &mut PgConnection) -> Result<()> {
        let mut after = None;
        loop {
            let sweep = engine::sweep_keys(conn, &self.queues, after.as_ref(), KEYS_PER_SWEEP)?;
            match sweep.next {
                Some(next) => after = Some(next),
                None => return Ok(()),
            }
        }
    }

    /// Claims every job due now (up to `room`), before any is worked: the
    /// round's jobs. Jobs of types the registry does not handle come back
    /// set aside.
    fn claim_round(
        &self,
        conn: &mut PgConnection,
        types: &[String],
        room: Option<usize>,
    ) -> Result<Vec<JobRow>> {
        let mut rows = Vec::new();
        loop {
            let limit = room
                .map_or(CLAIM_MOST, |room| room.saturating_sub(rows.len()))
                .min(CLAIM_MOST);
            if limit == 0 {
                return Ok(rows);
            }
            let claim = Claim::new(WORKER_ID)
                .queues(&self.queues)
                .handled_types(types)
                .limit(i64::try_from(limit).unwrap_or(i64::MAX));
            let claimed = engine::claim(conn, &claim)?;
            if claimed.is_empty() {
                return Ok(rows);
            }
            rows.extend(claimed);
        }
    }

    /// Works one claimed job and writes its outcome.
    fn work(&self, conn: &mut PgConnection, row: JobRow, round: usize) -> Result<Worked> {
        let (outcome, attempt) = if row.status == JobStatus::Unhandled {
            // Set aside by the claim itself: no attempt was made.
            (Outcome::Unhandled, None)
        } else {
            let mut inline = Inline::claimed(self.registry, &row, conn);
            if let Some(config) = &self.config {
                inline = inline.config(config);
            }
            let attempt = inline.run()?;
            write::outcome(conn, &row, &attempt, self.writing())?;
            // Failed for good or cancelled: the registry's lifecycle
            // handlers are told, in the same transaction, as a runner's are.
            if matches!(
                attempt.outcome,
                Outcome::Retried { .. } | Outcome::Failed { .. } | Outcome::Cancelled
            ) {
                jobqueue_runner::inline::tell_lifecycle(self.registry, conn, row.id)?;
            }
            (attempt.outcome.clone(), Some(attempt))
        };
        let now = jobqueue_core::get_job(conn, row.id)?.found();
        let ended = Ended::of(
            now.as_ref(),
            matches!(outcome, Outcome::Snoozed(_) | Outcome::RateLimited(_)),
        );
        let (reports, rolled_back) =
            attempt.map_or((Vec::new(), false), |a| (a.reports, a.rolled_back));
        Ok(Worked {
            id: row.id,
            attempt: row.attempts,
            job_type: row.job_type,
            queue: row.queue,
            payload: row.payload,
            round,
            outcome,
            ended,
            reports,
            rolled_back,
        })
    }

    /// How outcomes are written: as the configuration says, or a
    /// runner's defaults.
    fn writing(&self) -> Writing {
        match &self.config {
            Some(config) => Writing {
                retention: config.retention,
                max_snoozes: config.max_snoozes,
            },
            None => Writing {
                retention: Retention::default(),
                max_snoozes: DEFAULT_MAX_SNOOZES,
            },
        }
    }

    /// Whether a job the drain would work is still due (scheduled ones due
    /// by its time moved to `pending` first): a pending job of one of its
    /// queues that is not paused.
    fn still_due(&self, conn: &mut PgConnection) -> Result<bool> {
        self.promote(conn)?;
        Ok(jobqueue_core::list_queues(conn, Counting::Live)?
            .iter()
            .any(|queue| {
                !queue.paused
                    && queue.count(JobStatus::Pending) > 0
                    && (self.queues.is_empty() || self.queues.contains(&queue.queue))
            }))
    }
}
