//! Keyed jobs announced as waiting for their concurrency key's room: the
//! fetcher admits what it can of them before its next claim, so a job
//! whose key is free starts as soon as one that was due at once. And the
//! admitter, a thread beside the completer: it admits the next jobs of the
//! keys whose jobs the completer wrote outcomes of, so that the
//! completer's next flush never waits for an admission.

use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use crossbeam_channel::{Receiver, select};
use jobqueue_core::engine::QueueKey;

use super::Claimer;
use crate::db::Db;
use crate::shared::Shared;

/// Waiting jobs one admission looks at; more are looked at by the next.
const ADMIT_BATCH: i64 = 1000;

/// Keys whose admission after a completion may be left out at once
/// (`Announced::skipped`); past that, the admitter admits again.
const MOST_SKIPPED: usize = 10_000;

/// What notifications said of waiting jobs.
#[derive(Debug, Default)]
pub(super) struct Announced {
    /// Waiting jobs were announced since the fetcher last admitted.
    pending: AtomicBool,
    /// Counts announcements of waiting jobs and changes of the listener's
    /// connection (from 1 once it first connects): while it stays the
    /// same, the listener heard of no job that started waiting.
    epoch: AtomicU64,
    /// Whether the listener is connected (it hears every announcement).
    listening: AtomicBool,
    /// The epoch at which a look found no job of the runner's queues
    /// waiting (0: none such; epochs a look runs under start at 1).
    quiet: AtomicU64,
    /// The keys whose admission was left out while the epoch stayed
    /// quiet. The listener hears of a job that starts waiting some time
    /// after its enqueue commits, and a runner can claim, run and finish
    /// the job enqueued beside it before then: the admission of that key
    /// is owed once the announcement arrives, and whoever takes this list
    /// (the fetcher after an announcement, the admitter's next admission)
    /// makes it.
    skipped: Mutex<Vec<QueueKey>>,
}

impl Announced {
    pub(super) fn set(&self) {
        self.epoch.fetch_add(1, Ordering::AcqRel);
        self.pending.store(true, Ordering::Release);
    }

    fn take(&self) -> bool {
        self.pending.swap(false, Ordering::AcqRel)
    }

    /// The listener connected (`true`: it hears announcements from now
    /// on) or lost its connection.
    pub(super) fn listening(&self, on: bool) {
        // The epoch first: once connected, no look runs under epoch 0.
        self.epoch.fetch_add(1, Ordering::AcqRel);
        self.listening.store(on, Ordering::Release);
    }

    /// The current epoch, while the listener is connected.
    fn epoch(&self) -> Option<u64> {
        self.listening
            .load(Ordering::Acquire)
            .then(|| self.epoch.load(Ordering::Acquire))
    }

    /// Whether the admission after jobs of `keys` finished may be left out:
    /// a look found no job waiting and the listener, connected throughout,
    /// has heard of none since. If so, keeps `keys` in `skipped` for the
    /// announcement the listener may not have heard yet.
    fn skip(&self, keys: &[QueueKey]) -> bool {
        let Some(now) = self.epoch() else {
            return false;
        };
        if self.quiet.load(Ordering::Acquire) != now {
            return false;
        }
        let mut skipped = self.skipped.lock().unwrap_or_else(|e| e.into_inner());
        if skipped.len() + keys.len() > MOST_SKIPPED {
            return false;
        }
        let before = skipped.len();
        skipped.extend_from_slice(keys);
        // Looked at again with the keys in place: an announcement that
        // came between the first look and now may have been taken, with
        // the list before these keys, already.
        if self.epoch() == Some(now) {
            return true;
        }
        skipped.truncate(before);
        false
    }

    /// Takes the keys whose admission was left out (see `skipped`).
    fn take_skipped(&self) -> Vec<QueueKey> {
        std::mem::take(&mut *self.skipped.lock().unwrap_or_else(|e| e.into_inner()))
    }
}

/// The admitter: admits the next jobs of the keys the completer sends
/// (`Claimer::keys_finished`), each list sent while an admission ran taken
/// with the next, until `stop` disconnects (after the completer stopped);
/// then admits what was sent still, and ends.
pub(super) fn run_admitter(shared: &Shared, claimer: &Claimer, stop: &Receiver<()>) {
    let mut db = Db::new(shared, "admitter");
    let finished = &claimer.finished_rx;
    // Whether the last admission admitted jobs: their keys' lines go on,
    // so the next one need not look for lines first.
    let mut in_line = false;
    loop {
        let (mut keys, last) = select! {
            recv(finished) -> keys => (keys.unwrap_or_default(), false),
            recv(stop) -> _ => (Vec::new(), true),
        };
        keys.extend(finished.try_iter().flatten());
        keys.sort_unstable();
        keys.dedup();
        if !keys.is_empty() {
            in_line = admit_after(shared, claimer, &mut db, &keys, in_line) > 0;
        }
        if last {
            log::debug!("admitter stopped");
            return;
        }
    }
}

/// After jobs of `keys` got their outcomes: admits the next jobs of those
/// keys and of those whose admission was left out before (the statement
/// wakes the queues that got due jobs; this runner's fetcher is woken here
/// too), without looking for the keys with lines first if `in_line`. Left
/// out while no job of the runner's queues waits: a look found none, and
/// the listener, connected throughout, heard of none since (it hears of
/// every job that starts waiting, and the look began after the epoch it is
/// kept under was read); the keys are kept for the announcement it may
/// hear late (`Announced::skip`). A failure leaves the keys to the
/// maintenance's admission pass. Returns how many jobs it admitted.
fn admit_after(
    shared: &Shared,
    claimer: &Claimer,
    db: &mut Db,
    keys: &[QueueKey],
    in_line: bool,
) -> i64 {
    let announced = &claimer.waiting;
    let epoch = announced.epoch();
    if announced.skip(keys) {
        return 0;
    }
    let mut keys = keys.to_vec();
    let owed = announced.take_skipped();
    let in_line = in_line && owed.is_empty();
    if !owed.is_empty() {
        keys.extend(owed);
        keys.sort_unstable();
        keys.dedup();
    }
    let keys = &keys;
    let queues = &shared.config.queues;
    match db.run(&shared.health, |session| {
        let admitted = if in_line {
            session.admit_keys_in_line(keys)?
        } else {
            session.admit_keys(keys)?
        };
        let quiet = admitted == 0 && epoch.is_some() && !session.any_waiting(queues)?;
        Ok((admitted, quiet))
    }) {
        Ok((admitted, quiet)) => {
            if admitted > 0 {
                claimer.wake();
            }
            let quiet_at = epoch.filter(|_| quiet).unwrap_or(0);
            announced.quiet.store(quiet_at, Ordering::Release);
            admitted
        }
        Err(e) => {
            log::debug!("admitting the next jobs of {} keys failed: {e}", keys.len());
            0
        }
    }
}

/// If waiting jobs were announced, admits those whose key has room (the
/// statement wakes the queues that got due jobs, this runner's included)
/// and marks the others as looked at: they wait for a job of their key to
/// finish. Admits too the next jobs of the keys whose admission after a
/// completion was left out before the announcement was heard. A full batch
/// it settled whole leaves the announcement up for the next round; one
/// with jobs of keys an open enqueue holds (which a next round would read
/// again), or a failure, leaves the rest to the maintenance's admission
/// pass, which pages past them.
pub(super) fn admit_announced(shared: &Shared, claimer: &Claimer, db: &mut Db) {
    if !claimer.waiting.take() {
        return;
    }
    let owed = claimer.waiting.take_skipped();
    let queues = &shared.config.queues;
    match db.run(&shared.health, |session| {
        if !owed.is_empty() {
            session.admit_keys(&owed)?;
        }
        session.admit_new(queues, None, ADMIT_BATCH)
    }) {
        Ok(page) if page.next.is_some() && page.busy == 0 => claimer.waiting.set(),
        Ok(_) => {}
        Err(e) => log::debug!("admitting waiting keyed jobs failed: {e}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(name: &str) -> QueueKey {
        QueueKey {
            queue: "q".to_owned(),
            key: name.to_owned(),
        }
    }

    /// A listener connected, and a look that found nothing waiting.
    fn quiet() -> Announced {
        let announced = Announced::default();
        announced.listening(true);
        let now = announced.epoch().expect("connected");
        announced.quiet.store(now, Ordering::Release);
        announced
    }

    #[test]
    fn an_admission_left_out_before_the_announcement_is_heard_is_owed_after_it() {
        let announced = quiet();
        // A job of "line" finished before the listener heard that the
        // jobs enqueued beside it wait.
        assert!(announced.skip(&[key("line")]));
        announced.set();
        assert!(announced.take());
        assert_eq!(announced.take_skipped(), vec![key("line")]);
        // Once heard, nothing is left out.
        assert!(!announced.skip(&[key("line")]));
        assert!(announced.take_skipped().is_empty());
    }

    #[test]
    fn an_announcement_taken_between_the_look_and_the_keeping_leaves_nothing_behind() {
        let announced = quiet();
        // The admitter's first look saw the quiet epoch; the announcement
        // and the fetcher's take come before it keeps its keys, with the
        // list still empty.
        let now = announced.epoch().expect("connected");
        assert_eq!(announced.quiet.load(Ordering::Acquire), now);
        announced.set();
        assert!(announced.take());
        assert!(announced.take_skipped().is_empty());
        // Its keeping finds the epoch moved: it admits itself.
        assert!(!announced.skip(&[key("line")]));
        assert!(announced.take_skipped().is_empty());
    }

    #[test]
    fn a_lost_listener_leaves_nothing_out_and_too_many_keys_are_admitted_at_once() {
        let announced = quiet();
        announced.listening(false);
        assert!(!announced.skip(&[key("a")]));
        let announced = quiet();
        let many: Vec<QueueKey> = (0..=MOST_SKIPPED).map(|i| key(&i.to_string())).collect();
        assert!(!announced.skip(&many));
        assert!(announced.take_skipped().is_empty());
    }
}
