//! Keyed jobs announced as waiting for their concurrency key's room: the
//! fetcher admits what it can of them before its next claim, so a job
//! whose key is free starts as soon as one that was due at once.

use std::sync::atomic::{AtomicBool, Ordering};

use super::Claimer;
use crate::db::Db;
use crate::shared::Shared;

/// Waiting jobs one admission looks at; more are looked at by the next.
const ADMIT_BATCH: i64 = 1000;

/// Whether notifications announced waiting jobs since the fetcher last
/// admitted.
#[derive(Debug, Default)]
pub(super) struct Announced(AtomicBool);

impl Announced {
    pub(super) fn set(&self) {
        self.0.store(true, Ordering::Release);
    }

    fn take(&self) -> bool {
        self.0.swap(false, Ordering::AcqRel)
    }
}

/// If waiting jobs were announced, admits those whose key has room (the
/// statement wakes the queues that got due jobs, this runner's included)
/// and marks the others as looked at: they wait for a job of their key to
/// finish. A full batch leaves the announcement up for the next round; a
/// failure leaves the jobs to the maintenance's admission pass.
pub(super) fn admit_announced(shared: &Shared, claimer: &Claimer, db: &mut Db) {
    if !claimer.waiting.take() {
        return;
    }
    let queues = &shared.config.queues;
    match db.run(&shared.health, |session| {
        session.admit_new(queues, ADMIT_BATCH)
    }) {
        Ok((_, looked)) if looked as i64 >= ADMIT_BATCH => claimer.waiting.set(),
        Ok(_) => {}
        Err(e) => log::debug!("admitting waiting keyed jobs failed: {e}"),
    }
}
