//! The claims under way on the claim connections: what they may take,
//! held against the runner's room until their jobs are delivered, and the
//! order their jobs are delivered in (a fetch claim's jobs never overtake
//! those of the fetch claim sent before it: within a queue, jobs start in
//! the order its claims took them).

use std::collections::VecDeque;

use super::connections::{Report, Task};

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
