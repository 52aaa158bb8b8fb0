//! The job types another live runner of this runner's queues handles and
//! this one does not, as the fetcher last read them: claims leave their
//! jobs for that runner instead of setting them aside (which it would take
//! back, and this one set aside again, over and over).

use std::time::{Duration, Instant};

use crate::db::Db;
use crate::shared::Shared;

/// The fetcher's last read of the types handled elsewhere, and when it was
/// made.
#[derive(Default)]
pub(super) struct ElsewhereRead {
    /// None before the first read: this runner sets aside what it has no
    /// handler for, as a runner alone does.
    types: Vec<String>,
    read_at: Option<Instant>,
}

impl ElsewhereRead {
    /// The types as last read.
    pub(super) fn types(&self) -> &[String] {
        &self.types
    }

    /// Reads them again before the next claim: a claim set jobs aside,
    /// which may belong to a runner started since the last read (at most
    /// one claim's worth is set aside, not every job of its type met until
    /// the next read).
    pub(super) fn expire(&mut self) {
        self.read_at = None;
    }

    /// Reads them again if the last read is older than `age` (a failed
    /// read keeps what was read before).
    pub(super) fn refresh_if_older(&mut self, shared: &Shared, db: &mut Db, age: Duration) {
        if self.read_at.is_some_and(|at| at.elapsed() < age) {
            return;
        }
        let config = &shared.config;
        if let Ok(types) = db.run(&shared.health, |session| {
            jobqueue_core::engine::types_handled_elsewhere(
                session.conn(),
                &config.worker_id,
                &config.queues,
                &shared.job_types,
            )
        }) {
            self.types = types;
            self.read_at = Some(Instant::now());
        }
    }
}
