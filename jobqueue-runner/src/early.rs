//! Early claims: while the runner is busy with the backlog of some queues,
//! jobs announced in another queue are claimed at once, on a connection of
//! their own, so they start at the next free worker instead of waiting for
//! room, or for the fetcher's claim in progress, behind the others' jobs.
//!
//! An early claim takes only from queues of which the runner holds no job
//! waiting for a worker (those queues' new jobs would wait anyway), at most
//! `RunnerConfig::early_reserve` jobs held at once. An idle runner needs
//! none: its fetcher claims at once. While the fetcher's claims of some
//! queue resume (a long transaction holds the xmin horizon, see
//! `resume.rs`), there are none: an early claim reads its queues from the
//! start, through every job claimed since the transaction began.

use std::collections::HashSet;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use crossbeam_channel::{Receiver, Sender, select};
use jobqueue_core::Claim;

use crate::db::Db;
use crate::dispatch::JobSender;
use crate::fetcher::deliver;
use crate::messages::Outcome;
use crate::shared::Shared;

pub(crate) fn run(
    shared: Arc<Shared>,
    jobs: JobSender,
    outcomes: Sender<Outcome>,
    announced: Receiver<()>,
    stop: Receiver<()>,
) {
    let config = &shared.config;
    let mut db = Db::new(&shared, "early claims");
    let mut claim = Claim::new(config.worker_id.clone())
        .queues(config.queues.iter().cloned())
        .lease(config.lease);
    let mut unhandled_types = HashSet::new();
    loop {
        select! {
            recv(announced) -> message => if message.is_err() { break },
            recv(stop) -> _ => break,
        }
        if shared.is_stopping() {
            break;
        }
        let held = shared.early_held.load(Ordering::Acquire);
        let room = config.early_reserve().saturating_sub(held);
        if room == 0
            || shared.outstanding.load(Ordering::Acquire) == 0
            || shared.resuming.load(Ordering::Acquire)
        {
            continue;
        }
        claim.limit = room as i64;
        claim.global_limits = crate::fetcher::limits_policy(&shared);
        claim.queue_limits = shared.queue_limits.room();
        for queue in jobs.waiting_queues() {
            claim.cap_queue(&queue, 0);
        }
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
    }
    log::debug!("early claims stopped");
}
