//! Whether the runner's queues have global or rate limits (across the
//! fleet), as the fetcher last read it, and what claims do about it.

use std::sync::atomic::{AtomicU8, Ordering};
use std::time::{Duration, Instant};

use jobqueue_core::engine::GlobalLimits;

use crate::db::Db;
use crate::shared::Shared;

/// Not read yet.
const UNKNOWN: u8 = 0;
/// None of the runner's queues has a global or rate limit.
const NONE: u8 = 1;
/// Some of the runner's queues have one.
const SOME: u8 = 2;

/// What the fetcher last read, for both claim threads.
pub(super) struct LimitsSeen(AtomicU8);

impl Default for LimitsSeen {
    fn default() -> Self {
        LimitsSeen(AtomicU8::new(UNKNOWN))
    }
}

impl LimitsSeen {
    /// Claims lock limited queues' rows only while some queue has a limit
    /// (or before it was read: always safe); otherwise a queue limited
    /// since the last read is left out of claims (never claimed over its
    /// limit) until the next read.
    pub(super) fn policy(&self) -> GlobalLimits {
        match self.0.load(Ordering::Acquire) {
            NONE => GlobalLimits::Skip,
            _ => GlobalLimits::Honour,
        }
    }

    fn store(&self, any: bool) {
        self.0
            .store(if any { SOME } else { NONE }, Ordering::Release);
    }
}

/// When the fetcher last read whether its queues have global or rate
/// limits.
#[derive(Default)]
pub(super) struct LimitsRead {
    read_at: Option<Instant>,
}

impl LimitsRead {
    /// Reads them again into `seen` if the last read is older than `age`.
    pub(super) fn refresh_if_older(
        &mut self,
        shared: &Shared,
        seen: &LimitsSeen,
        db: &mut Db,
        age: Duration,
    ) {
        if self.read_at.is_some_and(|at| at.elapsed() < age) {
            return;
        }
        let queues = &shared.config.queues;
        if let Ok(any) = db.run(&shared.health, |conn| conn.any_global_limit(queues)) {
            seen.store(any);
            self.read_at = Some(Instant::now());
        }
    }
}
