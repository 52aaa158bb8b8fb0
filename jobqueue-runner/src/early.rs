//! Early claims: while the runner is busy with the backlog of some queues,
//! jobs announced in another queue are claimed at once, on a connection of
//! their own, so they start at the next free worker instead of waiting for
//! room, or for the fetcher's claim in progress, behind the others' jobs.
//!
//! An early claim takes only from the queues announced since the last one,
//! and of those only the queues of which the runner holds no job waiting
//! for a worker (those queues' new jobs would wait anyway), at most
//! `RunnerConfig::early_reserve` jobs held at once. An idle runner needs
//! none: its fetcher claims at once. Queues whose claims resume (a long
//! transaction holds the xmin horizon, see `resume.rs`) are left to the
//! fetcher: an early claim reads its queues from the start, through every
//! job claimed since the transaction began.
//!
//! Meanwhile a busy runner's fetcher leaves the announced queues to the
//! early claim ([`left_to_early`]): a claim of the backlog's
//! batch takes tens of milliseconds on a saturated machine, and a quiet
//! queue's new job that it locked (`SKIP LOCKED` then hides it from the
//! early claim) would start only once the whole batch is written.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use crossbeam_channel::{Receiver, Sender, select};
use jobqueue_core::Claim;

use crate::db::Db;
use crate::dispatch::JobSender;
use crate::fetcher::deliver;
use crate::messages::Outcome;
use crate::shared::{Shared, lock};

/// The queues announced since the early claims last took them.
#[derive(Default)]
pub(crate) struct Announced {
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
    pub(crate) fn add(&self, queue: String) {
        let number = self.count.fetch_add(1, Ordering::Relaxed);
        let mut queues = lock(&self.queues);
        let left_out = queues.get(&queue).is_some_and(|last| last.left_out);
        queues.insert(queue, Announcement { number, left_out });
    }

    /// Whether no queue is announced (most of the time).
    pub(crate) fn is_empty(&self) -> bool {
        lock(&self.queues).is_empty()
    }

    /// The queues announced so far, with their announcements' numbers.
    fn taken(&self) -> Vec<(String, u64)> {
        lock(&self.queues)
            .iter()
            .map(|(queue, last)| (queue.clone(), last.number))
            .collect()
    }

    /// Forgets the `taken` queues, except those announced again since.
    /// Returns whether the fetcher left any of those forgotten out of a
    /// claim (it must be woken: the early claim may have left some of
    /// their jobs).
    fn forget(&self, taken: &[(String, u64)]) -> bool {
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
    /// claims are on ([`claims_on`]), for the early claim under way or
    /// about to start: those announced, except the `busy` ones.
    fn left_out_except(&self, busy: &HashSet<String>) -> Vec<String> {
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

/// The queues the fetcher leaves out of its next claim, for the early
/// claims (see the module documentation): those announced, while early
/// claims are on, except the `busy` ones (the fetcher's: with jobs waiting
/// for a worker, found by its last claim, or resuming). Once the early
/// claim returned, whatever it found, the fetcher is woken, so no job
/// waits on a queue left out.
pub(crate) fn left_to_early(shared: &Shared, busy: &HashSet<String>) -> Vec<String> {
    if !claims_on(shared) {
        return Vec::new();
    }
    shared.early_queues.left_out_except(busy)
}

/// Forgets the `taken` queues (see [`Announced::forget`]), waking the
/// fetcher if it left any out of a claim meanwhile.
fn hand_back(shared: &Shared, taken: &[(String, u64)]) {
    if shared.early_queues.forget(taken) {
        shared.wake_fetcher();
    }
}

fn claims_on(shared: &Shared) -> bool {
    early_room(shared).is_some()
}

/// Room in the early reserve, or `None` when early claims are off: the
/// runner is idle (it holds no job and its fetcher's last claim found no
/// backlog: the fetcher claims at once, and as fast).
fn early_room(shared: &Shared) -> Option<usize> {
    let held = shared.early_held.load(Ordering::Acquire);
    let room = shared.config.early_reserve().saturating_sub(held);
    let busy =
        shared.outstanding.load(Ordering::Acquire) > 0 || shared.backlog.load(Ordering::Acquire);
    let on = room > 0 && busy;
    on.then_some(room)
}

pub(crate) fn run(
    shared: Arc<Shared>,
    jobs: JobSender,
    outcomes: Sender<Outcome>,
    announced: Receiver<()>,
    stop: Receiver<()>,
) {
    let config = &shared.config;
    let mut db = Db::new(&shared, "early claims");
    let mut claim = Claim::new(config.worker_id.clone()).lease(config.lease);
    let mut unhandled_types = HashSet::new();
    loop {
        select! {
            recv(announced) -> message => if message.is_err() { break },
            recv(stop) -> _ => break,
        }
        if shared.is_stopping() {
            break;
        }
        let taken = shared.early_queues.taken();
        let Some(room) = early_room(&shared) else {
            hand_back(&shared, &taken);
            continue;
        };
        // Queues with jobs waiting for a worker are the fetcher's, and so
        // are those whose claims resume.
        let mut fetchers = jobs.waiting_queues();
        fetchers.extend(lock(&shared.resuming_queues).iter().cloned());
        let (mine, theirs): (Vec<_>, Vec<_>) = taken
            .iter()
            .cloned()
            .partition(|(queue, _)| !fetchers.contains(queue));
        if !theirs.is_empty() {
            hand_back(&shared, &theirs);
        }
        if mine.is_empty() {
            continue;
        }
        claim.queues = mine.iter().map(|(queue, _)| queue.clone()).collect();
        claim.queues.sort_unstable();
        claim.limit = room as i64;
        claim.global_limits = crate::fetcher::limits_policy(&shared);
        claim.queue_limits = shared.queue_limits.room();
        let started = std::time::Instant::now();
        match db.run(&shared.health, |session| session.claim(&claim)) {
            Ok(rows) => {
                let took = started.elapsed();
                if deliver(
                    &shared,
                    rows,
                    took,
                    &jobs,
                    &outcomes,
                    &mut unhandled_types,
                    true,
                )
                .is_err()
                {
                    return;
                }
            }
            Err(e) => {
                // The fetcher's next claim takes them instead.
                if !db.lost_connection() {
                    log::debug!("early claim failed: {}", crate::health::one_line(&e));
                }
            }
        }
        // Back to the fetcher, which may have claimed without them.
        hand_back(&shared, &mine);
    }
    log::debug!("early claims stopped");
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
