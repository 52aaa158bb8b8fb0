//! The claimer: the one part of the runner that decides what to claim and
//! when, and hands what it claimed to the workers.
//!
//! Two threads claim, and only they: the fetcher ([`fetcher`]), which
//! claims batches whenever the workers have room, and the early claims
//! ([`early`]), which take a quiet queue's new jobs at once while the
//! fetcher is busy with a backlog. What they decide on is the claimer's own
//! state, [`Claimer`]: the runner's room ([`room`]: jobs held against its
//! capacity, the early reserve, its own per-queue limits), the queues
//! announced by notifications ([`announced`]), where claims of each queue
//! resume while a long transaction holds the xmin horizon ([`resume`], the
//! fetcher's alone), whether the queues have global limits ([`limits`]),
//! and the wake-ups. The rest of the runner reaches it through three
//! calls: [`Claimer::announce`] (the listener), [`Claimer::wake`]
//! (maintenance, after it made jobs due) and [`Claimer::finished`] (the
//! completer and the lease keeper, when a job stops counting against the
//! room). Both threads hand jobs on through [`deliver`].
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

mod announced;
mod deliver;
mod early;
mod elsewhere;
mod fetcher;
mod limits;
mod queue_limits;
mod resume;
mod room;
mod waiting;

use std::collections::{BTreeSet, HashSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

use crossbeam_channel::{Receiver, Sender, bounded, unbounded};

pub(crate) use fetcher::HandBack;

use jobqueue_core::engine::QueueKey;

use crate::RunnerConfig;
use crate::dispatch::JobSender;
use crate::job_state::{InFlight, JobState};
use crate::shared::Shared;
use crate::sync::lock;

/// The claimer's state, shared by its two threads and reached by the rest
/// of the runner through [`announce`](Self::announce),
/// [`wake`](Self::wake) and [`finished`](Self::finished).
pub(crate) struct Claimer {
    /// Jobs held against the runner's capacity, and its per-queue limits.
    room: room::Room,
    /// The queues announced to the early claims and not yet claimed by
    /// them: the fetcher leaves them to the early claims meanwhile.
    announced: announced::Announced,
    /// The queues whose claims resume (see `resume.rs`): early claims,
    /// which read their queues from the start, leave them to the fetcher.
    resuming: Mutex<HashSet<String>>,
    /// The queues notifications announced while claims resume: how a
    /// runner of every queue learns of queues new to it meanwhile.
    announced_while_resuming: Mutex<HashSet<String>>,
    /// Whether the fetcher's last claim found a backlog (at least as many
    /// jobs as the early reserve): see `early.rs`.
    backlog: AtomicBool,
    /// Whether the runner's queues have global limits, as last read.
    limits: limits::LimitsSeen,
    /// The job types other live runners of its queues handle and it does
    /// not, as last read: claims leave their jobs to them.
    elsewhere: elsewhere::HandledElsewhere,
    /// Whether the runner works every queue.
    every_queue: bool,
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
    /// Wakes the early claims (capacity 1).
    wake_early: Sender<()>,
}

/// The receiving ends of the claimer's wake-ups, for its threads.
pub(crate) struct Wakeups {
    fetcher: Receiver<()>,
    early: Receiver<()>,
}

/// The claimer's threads.
pub(crate) struct Threads {
    pub(crate) fetcher: JoinHandle<()>,
    pub(crate) early: JoinHandle<()>,
}

impl Claimer {
    /// The claimer of a runner configured so, and its wake-ups.
    pub(crate) fn new(config: &RunnerConfig) -> (Arc<Claimer>, Wakeups) {
        let (wake_fetcher, fetcher) = bounded(1);
        let (wake_early, early) = bounded(1);
        // Unbounded: the admitter takes every list sent while it admitted
        // at once, so the lists waiting are those of one admission's time.
        let (finished, finished_rx) = unbounded();
        let claimer = Claimer {
            room: room::Room::new(config),
            announced: announced::Announced::default(),
            resuming: Mutex::default(),
            announced_while_resuming: Mutex::default(),
            backlog: AtomicBool::new(false),
            limits: limits::LimitsSeen::default(),
            elsewhere: elsewhere::HandledElsewhere::default(),
            every_queue: config.queues.is_empty(),
            unhandled_met: Mutex::default(),
            waiting: waiting::Announced::default(),
            finished,
            finished_rx,
            wake_fetcher,
            wake_early,
        };
        (Arc::new(claimer), Wakeups { fetcher, early })
    }

    /// Starts the fetcher and the early claims. `jobs`: the way to the
    /// workers; `hand_back`: what the fetcher needs to hand jobs back;
    /// `stop`: the shutdown broadcast.
    pub(crate) fn start(
        self: &Arc<Self>,
        shared: &Arc<Shared>,
        jobs: JobSender,
        hand_back: HandBack,
        wakeups: Wakeups,
        stop: Receiver<()>,
    ) -> std::io::Result<Threads> {
        let (claimer, s) = (Arc::clone(self), Arc::clone(shared));
        let (early_jobs, outcomes, early_stop) =
            (jobs.clone(), hand_back.outcomes.clone(), stop.clone());
        let early = std::thread::Builder::new()
            .name("jobqueue-early".into())
            .spawn(move || {
                early::run(
                    &s,
                    &claimer,
                    early_jobs,
                    outcomes,
                    wakeups.early,
                    early_stop,
                )
            })?;
        let (claimer, s) = (Arc::clone(self), Arc::clone(shared));
        let fetcher = std::thread::Builder::new()
            .name("jobqueue-fetcher".into())
            .spawn(move || fetcher::run(&s, &claimer, jobs, hand_back, wakeups.fetcher, stop))?;
        Ok(Threads { fetcher, early })
    }

    /// Wakes the fetcher: jobs may be due (or room was made).
    pub(crate) fn wake(&self) {
        let _ = self.wake_fetcher.try_send(());
    }

    /// New jobs are due in one of this runner's queues: wakes the fetcher,
    /// and the early claims for when the runner is busy.
    pub(crate) fn announce(&self, queue: String) {
        // Only names a claim takes are kept (a notification's payload is
        // text anyone may send on the channel).
        if jobqueue_core::limits::check_queue(&queue).is_ok() {
            // Only a runner of every queue claims from the queues announced
            // while claims resume.
            if self.every_queue && !lock(&self.resuming).is_empty() {
                lock(&self.announced_while_resuming).insert(queue.clone());
            }
            self.announced.add(queue);
        }
        self.wake();
        let _ = self.wake_early.try_send(());
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

    /// Notes whether the fetcher's last claim found a backlog.
    fn note_backlog(&self, backlog: bool) {
        self.backlog.store(backlog, Ordering::Release);
    }
}
