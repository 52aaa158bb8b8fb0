//! Maintenance: recovers jobs whose lease expired and prunes old finished
//! jobs. Every runner runs it; the statements use SKIP LOCKED, so many
//! runners at once share the work instead of colliding.

use std::sync::Arc;
use std::time::{Duration, Instant};

use crossbeam_channel::Receiver;

use crate::db::Db;
use crate::shared::{Shared, stopped_within};

/// Stale jobs recovered per statement.
const RESCUE_BATCH: i64 = jobqueue_core::DEFAULT_RESCUE_BATCH;

fn jittered(interval: Duration) -> Duration {
    interval.mul_f64(0.9 + fastrand::f64() * 0.2)
}

pub(crate) fn run(shared: Arc<Shared>, stop: Receiver<()>) {
    let config = &shared.config;
    let mut db = Db::new(&config.database_url, "maintenance");
    let mut next_rescue = Instant::now() + jittered(config.rescue_interval);
    let mut next_prune = Instant::now() + jittered(config.prune_interval);
    let mut next_vacuum = Instant::now() + jittered(config.vacuum_interval);
    loop {
        let wait = next_rescue
            .min(next_prune)
            .saturating_duration_since(Instant::now());
        if stopped_within(&stop, wait) {
            break;
        }
        let now = Instant::now();
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
