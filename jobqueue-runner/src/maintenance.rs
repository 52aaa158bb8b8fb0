//! Maintenance: moves scheduled jobs that became due to `pending`, takes
//! back jobs set aside as unhandled that this runner handles, recovers jobs
//! whose lease expired, prunes old finished jobs and vacuums the table.
//! Every runner runs it; the statements use SKIP LOCKED, so many runners at
//! once share the work instead of colliding.

use std::sync::Arc;
use std::time::{Duration, Instant};

use crossbeam_channel::Receiver;

use crate::backoff::stopped_within;
use crate::db::Db;
use crate::shared::Shared;

/// Stale jobs recovered per statement.
const RESCUE_BATCH: i64 = jobqueue_core::DEFAULT_RESCUE_BATCH;

/// Jobs moved to `pending` per statement.
const PROMOTE_BATCH: i64 = jobqueue_core::DEFAULT_PROMOTE_BATCH;

fn jittered(interval: Duration) -> Duration {
    interval.mul_f64(0.9 + fastrand::f64() * 0.2)
}

pub(crate) fn run(shared: Arc<Shared>, stop: Receiver<()>) {
    let config = &shared.config;
    let mut db = Db::new(&config.database_url, "maintenance");
    let started = Instant::now();
    let mut next_promote = started;
    // Jobs of this runner's types set aside while it was not running come
    // back at once.
    let mut next_reclaim = started;
    let mut next_rescue = started + jittered(config.rescue_interval);
    let mut next_prune = started + jittered(config.prune_interval);
    let mut next_vacuum = started + jittered(config.vacuum_interval);
    loop {
        let wait = [
            next_promote,
            next_reclaim,
            next_rescue,
            next_prune,
            next_vacuum,
        ]
        .into_iter()
        .min()
        .unwrap_or(started)
        .saturating_duration_since(Instant::now());
        if stopped_within(&stop, wait) {
            break;
        }
        let now = Instant::now();
        if now >= next_promote {
            next_promote = now + jittered(config.poll_interval);
            promote(&shared, &mut db);
        }
        if now >= next_reclaim {
            next_reclaim = now + jittered(config.rescue_interval);
            reclaim(&shared, &mut db);
        }
        if now >= next_rescue {
            next_rescue = now + jittered(config.rescue_interval);
            rescue(&shared, &mut db);
        }
        if now >= next_vacuum {
            next_vacuum = now + jittered(config.vacuum_interval);
            let started = Instant::now();
            match db.run(&shared.health, |conn| {
                conn.vacuum_if_needed(config.vacuum_min_dead)
            }) {
                Ok(true) => log::info!(
                    "vacuumed the jobs table in {:.0} ms",
                    started.elapsed().as_secs_f64() * 1000.0
                ),
                Ok(false) => {}
                Err(e) => log::debug!("vacuum failed: {e}"),
            }
        }
        if now >= next_prune {
            next_prune = now + jittered(config.prune_interval);
            match db.run(&shared.health, |conn| conn.prune(&config.retention)) {
                Ok(pruned) if pruned.completed + pruned.failed + pruned.cancelled > 0 => {
                    log::info!(
                        "pruned {} completed, {} failed, {} cancelled jobs",
                        pruned.completed,
                        pruned.failed,
                        pruned.cancelled
                    )
                }
                Ok(_) => {}
                Err(e) => log::debug!("prune failed: {e}"),
            }
        }
    }
    log::debug!("maintenance stopped");
}

fn rescue(shared: &Shared, db: &mut Db) {
    loop {
        match db.run(&shared.health, |conn| conn.rescue_stale(RESCUE_BATCH)) {
            Ok(rescued) => {
                if rescued.total() > 0 {
                    log::warn!(
                        "recovered {} jobs whose worker stopped renewing its lease: {} back to pending, \
                         {} failed (last attempt), {} cancelled",
                        rescued.total(),
                        rescued.requeued.len(),
                        rescued.failed.len(),
                        rescued.cancelled.len()
                    );
                }
                if !rescued.requeued.is_empty() {
                    shared.wake_fetcher();
                }
                if (rescued.total() as i64) < RESCUE_BATCH {
                    return;
                }
            }
            Err(e) => {
                log::debug!("stale-job recovery failed: {e}");
                return;
            }
        }
    }
}

/// Moves due scheduled jobs to `pending` (their queues are woken by the
/// statement's notification), a batch at a time until none are left.
fn promote(shared: &Shared, db: &mut Db) {
    loop {
        match db.run(&shared.health, |conn| conn.promote_due(PROMOTE_BATCH)) {
            Ok(moved) if moved >= PROMOTE_BATCH => continue,
            Ok(_) => return,
            Err(e) => {
                log::debug!("moving due scheduled jobs failed: {e}");
                return;
            }
        }
    }
}

/// Takes back jobs set aside as unhandled whose type this runner handles,
/// in the queues it works.
fn reclaim(shared: &Shared, db: &mut Db) {
    loop {
        let moved = db.run(&shared.health, |conn| {
            conn.reclaim_unhandled(&shared.job_types, &shared.config.queues, PROMOTE_BATCH)
        });
        match moved {
            Ok(0) => return,
            Ok(moved) => {
                log::info!(
                    "took back {moved} jobs set aside as unhandled: this runner handles them"
                );
                if moved < PROMOTE_BATCH {
                    return;
                }
            }
            Err(e) => {
                log::debug!("taking back unhandled jobs failed: {e}");
                return;
            }
        }
    }
}
