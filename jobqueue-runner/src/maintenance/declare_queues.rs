//! Applying the queues the registry declares (`Registry::queue`), once: a
//! runner applies them at its start when the database answers; this
//! service, scheduled only when it did not, does it then, and goes quiet.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use super::context::ServiceContext;
use super::service::{Cadence, PassReport, Service};
use crate::RunnerConfig;

/// Applies the declared queues' settings until one pass succeeds.
#[derive(Debug)]
pub struct DeclareQueues {
    interval: Duration,
    done: bool,
}

impl DeclareQueues {
    /// The service as `config` paces it (retries every `rescue_interval`).
    pub fn new(config: &RunnerConfig) -> Self {
        DeclareQueues {
            interval: config.rescue_interval,
            done: false,
        }
    }
}

/// What a pass of [`DeclareQueues`] did.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
#[non_exhaustive]
pub struct QueuesDeclared {
    /// `queue: setting` for each setting whose declaration changed and was
    /// applied.
    pub applied: Vec<String>,
}

impl fmt::Display for QueuesDeclared {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "applied the queue settings the code declares anew: {}",
            self.applied.join(", ")
        )
    }
}

impl PassReport for QueuesDeclared {
    fn log_level(&self) -> Option<log::Level> {
        (!self.applied.is_empty()).then_some(log::Level::Info)
    }
}

impl Service for DeclareQueues {
    type Report = QueuesDeclared;

    fn cadence(&self) -> Cadence {
        Cadence::from_start("declaring queues", self.interval)
    }

    fn run_once(&mut self, cx: &mut ServiceContext) -> jobqueue_core::Result<QueuesDeclared> {
        if self.done {
            return Ok(QueuesDeclared::default());
        }
        let shared = Arc::clone(&cx.shared);
        let applied = cx.run(|session| {
            jobqueue_core::declare_queues(session.conn(), shared.registry.declared_queues())
        })?;
        self.done = true;
        Ok(QueuesDeclared { applied })
    }

    fn next_after(&self, _: &QueuesDeclared) -> Duration {
        // Done: nothing to do until the runner stops; a long wait.
        Duration::from_secs(24 * 3600)
    }
}
