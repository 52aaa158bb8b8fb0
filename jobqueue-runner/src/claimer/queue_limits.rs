//! A runner's own concurrency per queue: at most N jobs of a queue held by
//! this runner at once (`--queues mail=4,media=2`), whatever its workers.

use std::sync::atomic::{AtomicUsize, Ordering};

use crate::RunnerConfig;

/// One limited queue and the jobs of it this runner holds.
struct Limit {
    queue: String,
    most: usize,
    held: AtomicUsize,
}

/// The runner's limited queues.
pub(crate) struct QueueLimits {
    limits: Vec<Limit>,
}

impl QueueLimits {
    pub(crate) fn new(config: &RunnerConfig) -> Self {
        QueueLimits {
            limits: config
                .queue_concurrency
                .iter()
                .map(|(queue, most)| Limit {
                    queue: queue.clone(),
                    most: *most,
                    held: AtomicUsize::new(0),
                })
                .collect(),
        }
    }

    /// The index of `queue`'s limit, if it has one.
    pub(crate) fn slot(&self, queue: &str) -> Option<usize> {
        self.limits.iter().position(|limit| limit.queue == queue)
    }

    /// One more job of the queue at `slot` is held.
    pub(crate) fn took(&self, slot: usize) {
        if let Some(limit) = self.limits.get(slot) {
            limit.held.fetch_add(1, Ordering::AcqRel);
        }
    }

    /// One job of the queue at `slot` is no longer held; true if the queue
    /// was at its limit (the fetcher may now claim from it again).
    pub(crate) fn freed(&self, slot: usize) -> bool {
        self.limits.get(slot).is_some_and(|limit| {
            let before = limit
                .held
                .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| n.checked_sub(1))
                .unwrap_or(0);
            before >= limit.most
        })
    }

    /// How many more jobs of each limited queue this runner may take now.
    pub(crate) fn room(&self) -> Vec<(String, i64)> {
        self.limits
            .iter()
            .map(|limit| {
                let held = limit.held.load(Ordering::Acquire);
                let room = limit.most.saturating_sub(held);
                (limit.queue.clone(), i64::try_from(room).unwrap_or(i64::MAX))
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn room_follows_the_jobs_held() {
        let mut config = RunnerConfig::new("postgres://x/y");
        config.queue_concurrency.insert("mail".into(), 2);
        let limits = QueueLimits::new(&config);
        let mail = limits.slot("mail").expect("limited");
        assert_eq!(limits.slot("media"), None);
        limits.took(mail);
        limits.took(mail);
        assert_eq!(limits.room(), [("mail".to_owned(), 0)]);
        assert!(limits.freed(mail), "it was at its limit");
        assert!(!limits.freed(mail));
        assert!(!limits.freed(mail), "never below zero");
        assert_eq!(limits.room(), [("mail".to_owned(), 2)]);
    }
}
