//! The claimer: the one part of the runner that decides what to claim and
//! when, and hands what it claimed to the workers.
//!
//! One thread decides, the fetcher ([`fetcher`]), and owns what it decides
//! on: the queues announced by notifications ([`announced`]), where claims
//! of each queue resume while a long transaction holds the xmin horizon
//! ([`resume`]), whether the queues have global limits ([`limits`]), the
//! types other runners handle ([`elsewhere`]), the claims under way
//! ([`under_way`]). Its claims run on the claim connections
//! ([`connections`]), two threads that only run what it sends them: a batch
//! for the workers' room, a second batch while the first runs when a
//! backlog allows it, or an early claim of a quiet queue's new jobs while
//! the runner is busy ([`early`], a mode of the fetcher's loop). What they
//! claimed comes back to the fetcher, which delivers it ([`deliver`]).
//!
//! The rest of the runner reaches the claimer through messages and the
//! runner's room ([`room`]: jobs held against its capacity, the early
//! reserve, its own per-queue limits, counted by whoever holds or frees
//! a job): [`Claimer::announce`] (the listener), [`Claimer::wake`]
//! (maintenance and the admitter, after they made jobs due) and
//! [`Claimer::finished`] (the completer and the lease keeper, when a job
//! stops counting against the room).
//!
//! Every claim names the job types the runner has handlers for: the claim
//! statement sets aside the other jobs it meets instead of claiming them,
//! and [`Claimer::take_unhandled_met`] passes their queues and types to
//! the maintenance service that sets aside the rest of such a backlog.
//! Keyed jobs announced as waiting for their key's room ([`waiting`]) are
//! admitted by the fetcher before its next claim. A
//! claim of every queue walks at most `MAX_CLAIM_QUEUES` queues with due
//! jobs, starting after the last queue the fetcher's claim before took from
//! (`Claim::rotate`), so claims go round the queues in turn.

mod connections;
mod elsewhere;
mod fetcher;
mod limits;
mod pacing;
mod queue_limits;
mod resume;
mod room;
mod shed;
mod under_way;
mod waiting;

use std::collections::{BTreeSet, HashSet};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

use crossbeam_channel::{Receiver, Sender, bounded, unbounded};

pub(crate) use fetcher::Wakeups;
pub(crate) use shed::HandBack;

use jobqueue_core::engine::QueueKey;

use crate::RunnerConfig;
use crate::dispatch::JobSender;
use crate::job_state::{InFlight, JobState};
use crate::shared::Shared;
use crate::sync::lock;

/// The claimer as the rest of the runner reaches it: the runner's room,
/// and the ways to the fetcher and the admitter.
pub(crate) struct Claimer {
    /// Jobs held against the runner's capacity, and its per-queue limits.
    room: room::Room,
    /// The queues and job types whose jobs claims set aside (no handler
    /// here) since the set-aside service last took them: that service
    /// sets aside the rest of each queue's backlog of the type.
    unhandled_met: Mutex<BTreeSet<(String, String)>>,
    /// Whether keyed jobs were announced as waiting for their key's room
    /// (the fetcher admits them before its next claim: `waiting.rs`).
    waiting: waiting::Announced,
    /// The keys whose jobs got their outcomes, for the admitter
    /// (`waiting.rs`): sent by the completer, never waited for.
    finished: Sender<Vec<QueueKey>>,
    /// Their receiving end, the admitter's.
    finished_rx: Receiver<Vec<QueueKey>>,
    /// Wakes the fetcher (capacity 1: wake-ups coalesce, none is lost).
    wake_fetcher: Sender<()>,
    /// Announces queues with new due jobs to the fetcher.
    announce: Sender<String>,
}

/// The claimer's threads.
pub(crate) struct Threads {
    pub(crate) fetcher: JoinHandle<()>,
    /// The claim connections', which end after the fetcher.
    pub(crate) connections: Vec<JoinHandle<()>>,
}

impl Claimer {
    /// The claimer of a runner configured so, and its wake-ups.
    pub(crate) fn new(config: &RunnerConfig) -> (Arc<Claimer>, Wakeups) {
        let (wake_fetcher, wake) = bounded(1);
        // Unbounded: the fetcher takes every announcement waiting each
        // time it is woken, and notifications of a queue are debounced.
        let (announce, announced) = unbounded();
        // Unbounded: the admitter takes every list sent while it admitted
        // at once, so the lists waiting are those of one admission's time.
        let (finished, finished_rx) = unbounded();
        let claimer = Claimer {
            room: room::Room::new(config),
            unhandled_met: Mutex::default(),
            waiting: waiting::Announced::default(),
            finished,
            finished_rx,
            wake_fetcher,
            announce,
        };
        (Arc::new(claimer), Wakeups { wake, announced })
    }

    /// Starts the fetcher and the claim connections. `jobs`: the way to
    /// the workers; `hand_back`: what the fetcher needs to hand jobs back;
    /// `stop`: the shutdown broadcast.
    pub(crate) fn start(
        self: &Arc<Self>,
        shared: &Arc<Shared>,
        jobs: JobSender,
        hand_back: HandBack,
        wakeups: Wakeups,
        stop: Receiver<()>,
    ) -> std::io::Result<Threads> {
        let (line, connections) = connections::Line::start(shared)?;
        let (claimer, s) = (Arc::clone(self), Arc::clone(shared));
        let fetcher = std::thread::Builder::new()
            .name("jobqueue-fetcher".into())
            .spawn(move || fetcher::run(&s, &claimer, jobs, hand_back, line, &wakeups, &stop))?;
        Ok(Threads {
            fetcher,
            connections,
        })
    }

    /// Wakes the fetcher: jobs may be due (or room was made).
    pub(crate) fn wake(&self) {
        let _ = self.wake_fetcher.try_send(());
    }

    /// New jobs are due in one of this runner's queues: tells the fetcher,
    /// which claims them at once (early, when the runner is busy).
    pub(crate) fn announce(&self, queue: String) {
        // Only names a claim takes are announced (a notification's payload
        // is text anyone may send on the channel); any wakes the fetcher.
        if jobqueue_core::limits::check_queue(&queue).is_err() || self.announce.send(queue).is_err()
        {
            self.wake();
        }
    }

    /// A job stops counting against the runner's capacity: its outcome was
    /// written, or its handler was abandoned. Counts once per job; wakes the
    /// fetcher when that makes the room it waits for.
    pub(crate) fn finished(&self, inflight: &InFlight, state: &JobState) {
        inflight.remove(&state.lease);
        if state.free_slot() && self.room.freed(state) {
            self.wake();
        }
    }

    /// Keyed jobs of one of this runner's queues wait for their key's room:
    /// wakes the fetcher, which admits them before it claims.
    pub(crate) fn announce_waiting(&self) {
        self.waiting.set();
        self.wake();
    }

    /// The listener connected (`true`) or lost its connection: while it is
    /// not connected, announcements of waiting jobs may be missed, so a
    /// connection counts as one (the fetcher admits what waits).
    pub(crate) fn listener_connected(&self, on: bool) {
        self.waiting.listening(on);
        if on {
            self.waiting.set();
        }
    }

    /// Jobs of `keys` got their outcomes: the admitter admits their keys'
    /// next jobs (see `waiting.rs`). Never waits.
    pub(crate) fn keys_finished(&self, keys: Vec<QueueKey>) {
        // The claimer holds the receiving end: the send cannot fail.
        let _ = self.finished.send(keys);
    }

    /// Runs the admitter until `stop` disconnects (see `waiting.rs`).
    pub(crate) fn run_admitter(&self, shared: &Shared, stop: &Receiver<()>) {
        waiting::run_admitter(shared, self, stop);
    }

    /// A claim set aside a job of `job_type` in `queue`: no handler here.
    fn met_unhandled(&self, queue: &str, job_type: &str) {
        let mut met = lock(&self.unhandled_met);
        // A claim sets aside up to a batch of one kind: one entry.
        if !met.iter().any(|(q, t)| q == queue && t == job_type) {
            met.insert((queue.to_owned(), job_type.to_owned()));
        }
    }

    /// The queues and types claims set aside jobs of since the last call.
    pub(crate) fn take_unhandled_met(&self) -> BTreeSet<(String, String)> {
        std::mem::take(&mut *lock(&self.unhandled_met))
    }
}

// The queues announced by notifications, for the early claims (see
// `fetcher.rs`): the fetcher's own, changed only by its loop.

/// The queues announced and not yet claimed by an early claim.
#[derive(Default)]
pub(super) struct Announced {
    /// Announced since the last early claim took them (in name order, as a
    /// claim names its queues).
    pending: BTreeSet<String>,
    /// Taken by the early claim under way.
    in_early: Vec<String>,
    /// Whether a fetch claim left some of them out since the last early
    /// claim returned: the fetcher must claim again once it does, since
    /// the early claim may have left some of their jobs.
    left_out: bool,
}

impl Announced {
    /// New jobs are due in `queue`. One announced again while an early
    /// claim of it is under way stays announced: its job may have
    /// committed after the claim began.
    pub(super) fn add(&mut self, queue: String) {
        self.pending.insert(queue);
    }

    /// Whether no queue is announced or being claimed early.
    pub(super) fn is_empty(&self) -> bool {
        self.pending.is_empty() && self.in_early.is_empty()
    }

    /// Whether queues wait for an early claim.
    pub(super) fn any_pending(&self) -> bool {
        !self.pending.is_empty()
    }

    /// Takes the announced queues for an early claim: those not `busy`
    /// (the others' jobs are the fetch claims', which take them as always).
    pub(super) fn take_for_early(&mut self, busy: &HashSet<String>) -> Vec<String> {
        let pending = std::mem::take(&mut self.pending);
        self.in_early = pending
            .into_iter()
            .filter(|queue| !busy.contains(queue))
            .collect();
        self.in_early.clone()
    }

    /// The early claim returned. Returns whether the fetcher must claim at
    /// once (it left some of the queues out meanwhile).
    pub(super) fn early_returned(&mut self) -> bool {
        self.in_early.clear();
        std::mem::take(&mut self.left_out)
    }

    /// No early claim takes the announced queues (none is under way): the
    /// fetch claims take every queue. Returns whether the fetcher must
    /// claim at once (as `early_returned`).
    pub(super) fn early_off(&mut self) -> bool {
        self.pending.clear();
        self.early_returned()
    }

    /// The queues a fetch claim leaves out for the early claims: those
    /// announced or being claimed early, except the `busy` ones.
    pub(super) fn left_out_except(&mut self, busy: &HashSet<String>) -> Vec<String> {
        let left: Vec<String> = self
            .pending
            .iter()
            .chain(&self.in_early)
            .filter(|queue| !busy.contains(*queue))
            .cloned()
            .collect();
        self.left_out |= !left.is_empty();
        left
    }
}

#[cfg(test)]
mod announced_tests {
    use super::*;

    fn busy(queues: &[&str]) -> HashSet<String> {
        queues.iter().map(|queue| (*queue).to_owned()).collect()
    }

    #[test]
    fn a_fetch_claim_leaves_out_announced_queues_but_busy_ones() {
        let mut announced = Announced::default();
        announced.add("quiet".into());
        announced.add("bulk".into());
        assert_eq!(announced.left_out_except(&busy(&["bulk"])), ["quiet"]);
        assert!(
            announced
                .left_out_except(&busy(&["bulk", "quiet"]))
                .is_empty()
        );
        // An early claim takes the quiet one; the bulk one is the fetcher's.
        assert_eq!(announced.take_for_early(&busy(&["bulk"])), ["quiet"]);
        assert!(!announced.any_pending());
        assert_eq!(announced.left_out_except(&busy(&[])), ["quiet"]);
        assert!(announced.early_returned(), "the fetcher left one out");
        assert!(announced.is_empty());
        assert!(!announced.early_returned(), "woken once");
    }

    #[test]
    fn a_queue_announced_again_during_an_early_claim_stays_announced() {
        let mut announced = Announced::default();
        announced.add("quiet".into());
        assert_eq!(announced.take_for_early(&busy(&[])), ["quiet"]);
        announced.add("quiet".into());
        assert!(!announced.early_returned(), "nothing was left out");
        assert!(announced.any_pending());
        // Early claims went off with it still announced: the fetch claims
        // take it, at once if one left it out.
        assert_eq!(announced.left_out_except(&busy(&[])), ["quiet"]);
        assert!(announced.early_off());
        assert!(announced.is_empty());
    }
}
