//! Whether the runner's queues have global or rate limits (across the
//! fleet), as the fetcher last read it, and what claims do about it.

use std::time::{Duration, Instant};

use jobqueue_core::engine::GlobalLimits;

use crate::db::Db;
use crate::shared::Shared;

/// The fetcher's last read of whether its queues have global or rate
/// limits, and when it was made.
#[derive(Default)]
pub(super) struct LimitsRead {
    /// `None`: not read yet.
    any: Option<bool>,
    read_at: Option<Instant>,
}

impl LimitsRead {
    /// Claims lock limited queues' rows only while some queue has a limit
    /// (or before it was read: always safe); otherwise a queue limited
    /// since the last read is left out of claims (never claimed over its
    /// limit) until the next read.
    pub(super) fn policy(&self) -> GlobalLimits {
        match self.any {
            Some(false) => GlobalLimits::Skip,
            _ => GlobalLimits::Honour,
        }
    }

    /// Reads them again if the last read is older than `age` (a failed
    /// read keeps what was read before).
    pub(super) fn refresh_if_older(&mut self, shared: &Shared, db: &mut Db, age: Duration) {
        if self.read_at.is_some_and(|at| at.elapsed() < age) {
            return;
        }
        let queues = &shared.config.queues;
        if let Ok(any) = db.run(&shared.health, |conn| conn.any_global_limit(queues)) {
            self.any = Some(any);
            self.read_at = Some(Instant::now());
        }
    }
}
