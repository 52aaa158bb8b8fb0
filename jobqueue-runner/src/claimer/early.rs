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

use std::collections::HashSet;

use crossbeam_channel::{Receiver, Sender, select};
use jobqueue_core::engine::Claim;

use super::Claimer;
use super::deliver::Delivery;
use crate::db::Db;
use crate::dispatch::JobSender;
use crate::messages::Outcome;
use crate::shared::Shared;
use crate::sync::lock;
use crate::trace::ClaimSpan;

/// The queues the fetcher leaves out of its next claim, for the early
/// claims (see the module documentation): those announced, while early
/// claims are on, except the `busy` ones (the fetcher's: with jobs waiting
/// for a worker, found by its last claim, or resuming). Once the early
/// claim returned, whatever it found, the fetcher is woken, so no job
/// waits on a queue left out.
pub(super) fn left_to_early(
    shared: &Shared,
    claimer: &Claimer,
    busy: &HashSet<String>,
) -> Vec<String> {
    if early_room(shared, claimer).is_none() {
        return Vec::new();
    }
    claimer.announced.left_out_except(busy)
}

/// Forgets the `taken` queues (see `Announced::forget`), waking the
/// fetcher if it left any out of a claim meanwhile.
fn hand_back(claimer: &Claimer, taken: &[(String, u64)]) {
    if claimer.announced.forget(taken) {
        claimer.wake();
    }
}

/// Room in the early reserve, or `None` when early claims are off: the
/// runner is idle (it holds no job and its fetcher's last claim found no
/// backlog: the fetcher claims at once, and as fast).
fn early_room(shared: &Shared, claimer: &Claimer) -> Option<usize> {
    let room = shared
        .config
        .early_reserve()
        .saturating_sub(claimer.room.early_held());
    let busy = claimer.room.outstanding() > 0
        || claimer.backlog.load(std::sync::atomic::Ordering::Acquire);
    (room > 0 && busy).then_some(room)
}

pub(super) fn run(
    shared: &Shared,
    claimer: &Claimer,
    jobs: JobSender,
    outcomes: Sender<Outcome>,
    announced: Receiver<()>,
    stop: Receiver<()>,
) {
    let config = &shared.config;
    let mut db = Db::new(shared, "early claims");
    let mut claim = Claim::new(config.worker_id.clone())
        .lease(config.lease)
        .handled_types(shared.job_types.iter().cloned());
    let mut delivery = Delivery::new(jobs.clone(), outcomes, true);
    loop {
        select! {
            recv(announced) -> message => if message.is_err() { break },
            recv(stop) -> _ => break,
        }
        if shared.is_stopping() {
            break;
        }
        let taken = claimer.announced.taken();
        let Some(room) = early_room(shared, claimer) else {
            hand_back(claimer, &taken);
            continue;
        };
        // Queues with jobs waiting for a worker are the fetcher's, and so
        // are those whose claims resume.
        let mut fetchers = jobs.waiting_queues();
        fetchers.extend(lock(&claimer.resuming).iter().cloned());
        let (mine, theirs): (Vec<_>, Vec<_>) = taken
            .iter()
            .cloned()
            .partition(|(queue, _)| !fetchers.contains(queue));
        if !theirs.is_empty() {
            hand_back(claimer, &theirs);
        }
        if mine.is_empty() {
            continue;
        }
        claim.queues = mine.iter().map(|(queue, _)| queue.clone()).collect();
        claim.queues.sort_unstable();
        claim.limit = room as i64;
        // As the fetcher's: of a rate-limited queue, only what free workers
        // start now.
        claim.rate_limited_most = Some(
            config
                .concurrency
                .saturating_sub(claimer.room.outstanding()) as i64,
        );
        claim.global_limits = claimer.limits.policy();
        claim.handled_elsewhere = claimer.elsewhere.types();
        claim.queue_limits = claimer.room.queue_room();
        let started = std::time::Instant::now();
        let span = ClaimSpan::enter("early", &claim);
        match db.run(&shared.health, |session| session.claim_paced(&claim)) {
            Ok(claimed) => {
                span.claimed(claimed.rows.len());
                let took = started.elapsed();
                if delivery
                    .deliver(
                        shared,
                        claimer,
                        claimed.rows,
                        took,
                        started,
                        &claimed.rate_margins,
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
        hand_back(claimer, &mine);
    }
    log::debug!("early claims stopped");
}
