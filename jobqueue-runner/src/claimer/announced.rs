//! The queues announced by notifications and not yet claimed by the early
//! claims (see `early.rs`), numbered as they come, so that one announced
//! again during an early claim stays announced.

use std::collections::{HashMap, HashSet};
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

use crate::sync::lock;

/// The queues announced since the early claims last took them.
#[derive(Default)]
pub(super) struct Announced {
    queues: Mutex<HashMap<String, Announcement>>,
    count: AtomicU64,
}

/// A queue's latest announcement.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
struct Announcement {
    /// Which one it is (they are numbered as they come).
    number: u64,
    /// Whether the fetcher left the queue out of a claim since.
    left_out: bool,
}

impl Announced {
    /// New jobs are due in `queue`.
    pub(super) fn add(&self, queue: String) {
        let number = self.count.fetch_add(1, Ordering::Relaxed);
        let mut queues = lock(&self.queues);
        let left_out = queues.get(&queue).is_some_and(|last| last.left_out);
        queues.insert(queue, Announcement { number, left_out });
    }

    /// Whether no queue is announced (most of the time).
    pub(super) fn is_empty(&self) -> bool {
        lock(&self.queues).is_empty()
    }

    /// The queues announced so far, with their announcements' numbers.
    pub(super) fn taken(&self) -> Vec<(String, u64)> {
        lock(&self.queues)
            .iter()
            .map(|(queue, last)| (queue.clone(), last.number))
            .collect()
    }

    /// Forgets the `taken` queues, except those announced again since.
    /// Returns whether the fetcher left any of those forgotten out of a
    /// claim (it must be woken: the early claim may have left some of
    /// their jobs).
    pub(super) fn forget(&self, taken: &[(String, u64)]) -> bool {
        let mut queues = lock(&self.queues);
        let mut left_out = false;
        for (queue, number) in taken {
            if let Some(last) = queues.get(queue)
                && last.number == *number
            {
                left_out |= last.left_out;
                queues.remove(queue);
            }
        }
        left_out
    }

    /// The queues the fetcher leaves out of its next claim while early
    /// claims are on, for the early claim under way or
    /// about to start: those announced, except the `busy` ones.
    pub(super) fn left_out_except(&self, busy: &HashSet<String>) -> Vec<String> {
        let mut queues = lock(&self.queues);
        let mut left = Vec::new();
        for (queue, last) in queues.iter_mut() {
            if !busy.contains(queue) {
                last.left_out = true;
                left.push(queue.clone());
            }
        }
        left
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn busy(queues: &[&str]) -> HashSet<String> {
        queues.iter().map(|queue| (*queue).to_owned()).collect()
    }

    #[test]
    fn the_fetcher_leaves_out_announced_queues_but_busy_ones() {
        let announced = Announced::default();
        announced.add("quiet".into());
        announced.add("bulk".into());
        assert_eq!(announced.left_out_except(&busy(&["bulk"])), ["quiet"]);
        assert!(
            announced
                .left_out_except(&busy(&["bulk", "quiet"]))
                .is_empty()
        );
    }

    #[test]
    fn a_queue_announced_again_during_an_early_claim_stays_announced() {
        let announced = Announced::default();
        announced.add("quiet".into());
        announced.add("other".into());
        let taken = announced.taken();
        // Announced again while the early claim is under way: its job may
        // have committed after the claim began, so the next claim takes it.
        announced.add("quiet".into());
        assert!(!announced.forget(&taken), "nothing was left out");
        assert_eq!(announced.left_out_except(&busy(&[])), ["quiet"]);
        assert!(
            announced.forget(&announced.taken()),
            "the fetcher left one out"
        );
        assert!(announced.is_empty());
        assert!(!announced.forget(&[]), "woken once");
    }
}
