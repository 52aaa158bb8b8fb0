//! The periodic-jobs thread: declares the registry's schedules, then fires
//! their due slots, sleeping until the next slot by the database's clock
//! (at most a minute, when it also declares them again so they do not show
//! as orphaned). Every runner with schedules runs it; a slot another runner
//! fired first is not fired again (see `jobqueue_core::engine::fire_due`).

use std::sync::Arc;
use std::time::{Duration, Instant};

use crossbeam_channel::Receiver;

use crate::backoff::{Backoff, stopped_within};
use crate::db::Db;
use crate::shared::Shared;

/// The longest sleep between passes, and how often schedules are declared.
const AT_MOST: Duration = Duration::from_secs(60);
/// Slept past a slot, so the database's `now()` has reached it.
const PAST_THE_SLOT: Duration = Duration::from_millis(5);

pub(crate) fn run(shared: Arc<Shared>, stop: Receiver<()>) {
    let schedules = shared.registry.schedules();
    let mut db = Db::new(&shared, "periodic jobs");
    let mut backoff = Backoff::new();
    let mut declared_at: Option<Instant> = None;
    loop {
        if declared_at.is_none_or(|at| at.elapsed() >= AT_MOST) {
            match db.run(&shared.health, |session| {
                jobqueue_core::engine::declare_schedules(session.conn(), schedules)
            }) {
                Ok(()) => declared_at = Some(Instant::now()),
                Err(e) => log::debug!("declaring schedules failed: {e}"),
            }
        }
        let wait = match db.run(&shared.health, |session| {
            jobqueue_core::engine::fire_due(session.conn(), schedules)
        }) {
            Ok(pass) => {
                backoff.reset();
                for (name, jobs) in &pass.fired {
                    log::info!("schedule {name}: enqueued {jobs} job(s)");
                }
                pass.next
                    .and_then(|(next, now)| (next - now).to_std().ok())
                    .map_or(AT_MOST, |until| (until + PAST_THE_SLOT).min(AT_MOST))
            }
            Err(e) => {
                log::debug!("firing schedules failed: {e}");
                backoff.next_delay()
            }
        };
        if stopped_within(&stop, wait) {
            break;
        }
    }
    log::debug!("periodic jobs stopped");
}
