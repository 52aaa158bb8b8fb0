//! Maintenance: moves scheduled jobs that became due to `pending`, takes
//! back jobs set aside as unhandled that this runner handles, recovers jobs
//! whose lease expired, prunes old finished jobs and vacuums the table.
//! Every runner runs it; the statements use SKIP LOCKED, so many runners at
//! once share the work instead of colliding.

use std::sync::Arc;
use std::time::{Duration, Instant};

use crossbeam_channel::Receiver;
use jobqueue_core::engine::QueueSession;

use crate::backoff::stopped_within;
use crate::claimer::Claimer;
use crate::db::Db;
use crate::shared::Shared;
use crate::vacuum_pacing::VacuumPacing;

/// Stale jobs recovered per statement.
const RESCUE_BATCH: i64 = jobqueue_core::engine::DEFAULT_RESCUE_BATCH;

/// Jobs moved to `pending` per statement.
const PROMOTE_BATCH: i64 = jobqueue_core::engine::DEFAULT_PROMOTE_BATCH;

fn jittered(interval: Duration) -> Duration {
    interval.mul_f64(0.9 + fastrand::f64() * 0.2)
}

pub(crate) fn run(shared: Arc<Shared>, claimer: &Claimer, stop: Receiver<()>) {
    let config = &shared.config;
    let mut db = Db::new(&shared, "maintenance");
    let started = Instant::now();
    let mut next_promote = started;
    // Jobs of this runner's types set aside while it was not running come
    // back at once.
    let mut next_reclaim = started;
    let mut next_rescue = started + jittered(config.rescue_interval);
    let mut next_prune = started + jittered(config.prune_interval);
    let mut next_vacuum = started + jittered(config.vacuum_interval);
    let mut vacuum_pacing = VacuumPacing::new(config.vacuum_interval);
    // While the vacuum backs off: when to look whether the horizon moved.
    let mut next_horizon_look = next_vacuum;
    loop {
        let horizon_look = vacuum_pacing.is_backing_off().then_some(next_horizon_look);
        let wait = [
            next_promote,
            next_reclaim,
            next_rescue,
            next_prune,
            next_vacuum,
        ]
        .into_iter()
        .chain(horizon_look)
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
            rescue(&shared, claimer, &mut db);
        }
        if vacuum_pacing.is_backing_off() && now >= next_horizon_look && now < next_vacuum {
            next_horizon_look = now + jittered(config.vacuum_interval);
            match db.run(&shared.health, QueueSession::xmin_horizon) {
                Ok(horizon) if vacuum_pacing.horizon_moved(horizon) => next_vacuum = now,
                Ok(_) => {}
                Err(e) => log::debug!("looking at the xmin horizon failed: {e}"),
            }
        }
        if now >= next_vacuum {
            let started = Instant::now();
            let truncate = vacuum_pacing.truncates(started);
            let vacuumed = match db.run_unbounded(&shared.health, |conn| {
                conn.vacuum_if_needed(config.vacuum_min_dead, truncate)
            }) {
                Ok(vacuumed) => vacuumed,
                Err(e) => {
                    log::debug!("vacuum failed: {e}");
                    None
                }
            };
            if let Some(v) = vacuumed {
                log::info!(
                    "vacuumed the jobs table in {:.0} ms ({} of {} dead row versions removed{})",
                    started.elapsed().as_secs_f64() * 1000.0,
                    v.removed(),
                    v.dead_before,
                    if truncate {
                        "; its empty end given back"
                    } else {
                        ""
                    }
                );
            }
            next_vacuum =
                Instant::now() + jittered(vacuum_pacing.after(vacuumed, truncate, started));
            if vacuum_pacing.is_backing_off() {
                // What holds the horizon now holds what it could not remove
                // (looked at only then: nothing is added while vacuums
                // reclaim).
                let horizon = db.run(&shared.health, QueueSession::xmin_horizon);
                if let Err(e) = &horizon {
                    log::debug!("looking at the xmin horizon failed: {e}");
                }
                vacuum_pacing.held_by(horizon.ok().flatten());
                next_horizon_look = Instant::now() + jittered(config.vacuum_interval);
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

/// Runs `step` (one batch of `batch` jobs at most, returning how many it
/// moved) until a batch comes back short, or the database refuses one.
fn in_batches(
    shared: &Shared,
    db: &mut Db,
    what: &str,
    batch: i64,
    mut step: impl FnMut(&mut QueueSession) -> jobqueue_core::Result<i64>,
) {
    loop {
        match db.run(&shared.health, &mut step) {
            Ok(moved) if moved >= batch => {}
            Ok(_) => return,
            Err(e) => {
                log::debug!("{what} failed: {e}");
                return;
            }
        }
    }
}

/// Recovers jobs whose lease expired.
fn rescue(shared: &Shared, claimer: &Claimer, db: &mut Db) {
    in_batches(shared, db, "stale-job recovery", RESCUE_BATCH, |conn| {
        let rescued = conn.rescue_stale(RESCUE_BATCH)?;
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
            claimer.wake();
        }
        if let Some(metrics) = &shared.metrics {
            metrics.rescued.inc_by(rescued.total() as u64);
        }
        Ok(rescued.total() as i64)
    });
}

/// Moves due scheduled jobs to `pending` (their queues are woken by the
/// statement's notification).
fn promote(shared: &Shared, db: &mut Db) {
    in_batches(
        shared,
        db,
        "moving due scheduled jobs",
        PROMOTE_BATCH,
        |conn| conn.promote_due(PROMOTE_BATCH),
    );
}

/// Takes back jobs set aside as unhandled whose type this runner handles,
/// in the queues it works.
fn reclaim(shared: &Shared, db: &mut Db) {
    in_batches(
        shared,
        db,
        "taking back unhandled jobs",
        PROMOTE_BATCH,
        |conn| {
            let moved =
                conn.reclaim_unhandled(&shared.job_types, &shared.config.queues, PROMOTE_BATCH)?;
            if moved > 0 {
                log::info!(
                    "took back {moved} jobs set aside as unhandled: this runner handles them"
                );
            }
            Ok(moved)
        },
    );
}
