//! The claims under way on the claim connections: what they may take,
//! held against the runner's room until their jobs are delivered, and the
//! order their jobs are delivered in (a fetch claim's jobs never overtake
//! those of the fetch claim sent before it: within a queue, jobs start in
//! the order its claims took them); and the delivery itself (`Delivery`):
//! claimed jobs counted against the runner's room and queued for the
//! workers, jobs of types without a handler set aside.

use std::collections::{HashSet, VecDeque};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crossbeam_channel::Sender;
use jobqueue_core::engine::QueueKey;
use jobqueue_core::{JobRow, JobStatus};

use super::Claimer;
use super::connections::{Report, Task};
use crate::dispatch::{Disconnected, JobSender};
use crate::job_state::JobState;
use crate::messages::{Claimed, Outcome, OutcomeKind};
use crate::metrics::Outcome as Ended;
use crate::shared::Shared;

/// A claim sent and not yet delivered.
struct Sent {
    number: u64,
    /// The most jobs it may take.
    limit: usize,
    /// The most jobs it may take of each queue it was given a cap for.
    caps: Vec<(String, i64)>,
    /// The most jobs of rate-limited queues it may take.
    rate_limited: i64,
    /// Its report, once back, while an earlier fetch claim's is not.
    report: Option<Report>,
}

/// The claims under way.
#[derive(Default)]
pub(super) struct UnderWay {
    /// Fetch claims, in the order sent.
    fetches: VecDeque<Sent>,
    /// The early claim, if one is under way.
    early: Option<Sent>,
}

impl UnderWay {
    /// `task` was sent to a connection.
    pub(super) fn sent(&mut self, task: &Task) {
        let sent = Sent {
            number: task.number,
            limit: usize::try_from(task.claim.limit).unwrap_or(0),
            caps: task.claim.queue_limits.clone(),
            rate_limited: task.claim.rate_limited_most.unwrap_or(0),
            report: None,
        };
        if task.early {
            self.early = Some(sent);
        } else {
            self.fetches.push_back(sent);
        }
    }

    /// The claim numbered `number` was not sent after all.
    pub(super) fn withdraw(&mut self, number: u64) {
        self.fetches.retain(|sent| sent.number != number);
        if self
            .early
            .as_ref()
            .is_some_and(|sent| sent.number == number)
        {
            self.early = None;
        }
    }

    /// A claim came back: the reports now due for delivery, in order
    /// (none while an earlier fetch claim is still under way). Their
    /// claims no longer count as under way.
    pub(super) fn returned(&mut self, report: Report) -> Vec<Report> {
        if report.task.early {
            self.early = None;
            return vec![report];
        }
        if let Some(sent) = self
            .fetches
            .iter_mut()
            .find(|sent| sent.number == report.task.number)
        {
            sent.report = Some(report);
        }
        let mut due = Vec::new();
        while self
            .fetches
            .front()
            .is_some_and(|sent| sent.report.is_some())
        {
            if let Some(report) = self.fetches.pop_front().and_then(|sent| sent.report) {
                due.push(report);
            }
        }
        due
    }

    /// Fetch claims under way (or back, waiting for an earlier one).
    pub(super) fn fetches(&self) -> usize {
        self.fetches.len()
    }

    /// Whether an early claim is under way.
    pub(super) fn early(&self) -> bool {
        self.early.is_some()
    }

    /// Whether no claim is under way.
    pub(super) fn is_empty(&self) -> bool {
        self.fetches.is_empty() && self.early.is_none()
    }

    fn all(&self) -> impl Iterator<Item = &Sent> {
        self.fetches.iter().chain(&self.early)
    }

    /// The most jobs the claims under way may yet deliver.
    pub(super) fn jobs(&self) -> usize {
        self.all().map(|sent| sent.limit).sum()
    }

    /// `most` (how many jobs of rate-limited queues the free workers start
    /// in time) less what the claims under way may take of them.
    pub(super) fn rate_limited_most(&self, most: i64) -> i64 {
        let taking: i64 = self.all().map(|sent| sent.rate_limited).sum();
        (most - taking).max(0)
    }

    /// `room` (each limited queue's room, as the runner's room counts it)
    /// less what the claims under way may take of each.
    pub(super) fn queue_room(&self, mut room: Vec<(String, i64)>) -> Vec<(String, i64)> {
        for (queue, left) in &mut room {
            let taking: i64 = self
                .all()
                .flat_map(|sent| &sent.caps)
                .filter(|(capped, _)| capped == queue)
                .map(|(_, cap)| *cap)
                .sum();
            *left = (*left - taking).max(0);
        }
        room
    }
}

// The hand-off: claimed jobs counted against the runner's room and
// queued for the workers, and jobs of types without a handler set aside.

/// One claim thread's way to the workers and the completer, and the job
/// types it has set aside (each logged once).
pub(super) struct Delivery {
    jobs: JobSender,
    outcomes: Sender<Outcome>,
    unhandled_types: HashSet<String>,
    /// Claims of the early reserve (see `RunnerConfig::early_reserve`).
    early: bool,
}

impl Delivery {
    pub(super) fn new(jobs: JobSender, outcomes: Sender<Outcome>, early: bool) -> Self {
        Delivery {
            jobs,
            outcomes,
            unhandled_types: HashSet::new(),
            early,
        }
    }

    /// Hands claimed `rows` to the workers. Rows the claim set aside
    /// itself (types without a handler here: see `Claim::handled_types`)
    /// are counted, logged once per type, and noted for the set-aside
    /// service, which sets aside the rest of their queue's backlog of that
    /// type. `took`: the claim's round trip; `sent`, when it was sent, from
    /// which the jobs of the rate-limited queues in `margins` must start
    /// within their queue's margin.
    pub(super) fn deliver(
        &mut self,
        shared: &Shared,
        claimer: &Claimer,
        mut rows: Vec<JobRow>,
        took: Duration,
        sent: Instant,
        margins: &[(String, Duration)],
    ) -> Result<(), Disconnected> {
        if let Some(metrics) = &shared.metrics {
            metrics.claimed(took, rows.len());
        }
        rows.retain(|row| {
            let set_aside = row.status != JobStatus::Claimed;
            if set_aside {
                self.set_aside(shared, claimer, row);
            }
            !set_aside
        });
        let got = rows.len();
        claimer.room.took(got, self.early);
        crate::counters::Counters::add(&shared.counters.claimed, got);
        if got == 0 {
            crate::counters::Counters::add(&shared.counters.empty_claims, 1);
        }
        for row in rows {
            let queue_slot = claimer.room.take_queue_slot(&row.queue);
            let mut state = JobState::new(
                row.lease(),
                row.job_type.clone(),
                queue_slot,
                self.early,
                row.events_count,
            );
            state.key = row.concurrency_key.clone().map(|key| QueueKey {
                queue: row.queue.clone(),
                key,
            });
            state.workflow = row.workflow_id.is_some();
            state.start_by = margins
                .iter()
                .find(|(queue, _)| *queue == row.queue)
                .map(|(_, margin)| sent + *margin);
            if let Some(metrics) = &shared.metrics {
                let job = metrics.job(&row.queue, &row.job_type);
                job.claimed();
                state.metrics = Some(job);
                state.waited_at_claim = row
                    .claimed_at
                    .and_then(|claimed| (claimed - row.run_at).to_std().ok())
                    .unwrap_or_default();
            }
            let state = Arc::new(state);
            shared.inflight.insert(Arc::clone(&state));
            if shared.registry.get(&row.job_type).is_none() {
                // Only a runner with no handlers at all claims without handled
                // types (an empty list takes every type): set aside here.
                let _ = self.outcomes.send(Outcome::new(&state, OutcomeKind::Park));
                continue;
            }
            self.jobs.send(Claimed { row, state })?;
        }
        Ok(())
    }

    /// A job the claim set aside (or cancelled: its cancellation was asked
    /// for) because no handler here takes its type.
    fn set_aside(&mut self, shared: &Shared, claimer: &Claimer, row: &JobRow) {
        let (counter, outcome) = match row.status {
            JobStatus::Cancelled => (&shared.counters.cancelled, Ended::Cancelled),
            _ => (&shared.counters.unhandled, Ended::Unhandled),
        };
        crate::counters::Counters::add(counter, 1);
        if let Some(metrics) = &shared.metrics {
            metrics.job(&row.queue, &row.job_type).ended(outcome);
        }
        claimer.met_unhandled(&row.queue, &row.job_type);
        if self.unhandled_types.insert(row.job_type.clone()) {
            log::warn!(
                "no handler for job type `{}` (queue `{}`): its jobs are set aside \
                 as unhandled until a runner that handles it starts; register \
                 it here, or give it a queue of its own",
                row.job_type,
                row.queue
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, Instant};

    use jobqueue_core::engine::{Claim, Claimed};

    use super::*;

    fn task(number: u64, early: bool, limit: i64, caps: &[(&str, i64)]) -> Task {
        let mut claim = Claim::new("w").limit(limit);
        claim.queue_limits = caps.iter().map(|(q, n)| ((*q).to_owned(), *n)).collect();
        Task::new(number, early, claim)
    }

    fn report(task: Task) -> Report {
        Report {
            task,
            started: Instant::now(),
            took: Duration::ZERO,
            claimed: Ok(Claimed::default()),
            lost: false,
        }
    }

    fn numbers(reports: &[Report]) -> Vec<u64> {
        reports.iter().map(|report| report.task.number).collect()
    }

    #[test]
    fn a_fetch_claim_back_first_waits_for_the_one_sent_before_it() {
        let mut under_way = UnderWay::default();
        for number in 1..=3 {
            let task = task(number, number == 2, 100, &[]);
            under_way.sent(&task);
        }
        assert_eq!((under_way.fetches(), under_way.early()), (2, true));
        assert_eq!(under_way.jobs(), 300);
        // The second batch (3) is back before the first (1): it waits, and
        // its jobs still count as under way.
        assert!(
            under_way
                .returned(report(task(3, false, 100, &[])))
                .is_empty()
        );
        assert_eq!(under_way.jobs(), 300);
        // The early claim is delivered as it comes.
        assert_eq!(
            numbers(&under_way.returned(report(task(2, true, 100, &[])))),
            [2]
        );
        assert_eq!(
            numbers(&under_way.returned(report(task(1, false, 100, &[])))),
            [1, 3]
        );
        assert!(under_way.is_empty());
        assert_eq!(under_way.jobs(), 0);
    }

    #[test]
    fn a_limited_queues_room_is_shared_by_the_claims_under_way() {
        let mut under_way = UnderWay::default();
        under_way.sent(&task(1, false, 10, &[("mail", 3), ("quiet", 0)]));
        let room = vec![("mail".to_owned(), 4), ("media".to_owned(), 2)];
        assert_eq!(
            under_way.queue_room(room.clone()),
            [("mail".to_owned(), 1), ("media".to_owned(), 2)]
        );
        under_way.sent(&task(2, true, 10, &[("mail", 1)]));
        assert_eq!(
            under_way.queue_room(room.clone())[0],
            ("mail".to_owned(), 0)
        );
        under_way.returned(report(task(1, false, 10, &[])));
        assert_eq!(under_way.queue_room(room)[0], ("mail".to_owned(), 3));
    }

    #[test]
    fn the_starts_the_free_workers_make_in_time_are_shared_by_the_claims_under_way() {
        let mut under_way = UnderWay::default();
        let mut first = task(1, false, 100, &[]);
        first.claim.rate_limited_most = Some(6);
        under_way.sent(&first);
        assert_eq!(under_way.rate_limited_most(8), 2);
        assert_eq!(under_way.rate_limited_most(5), 0);
        under_way.returned(report(first));
        assert_eq!(under_way.rate_limited_most(8), 8);
    }
}
