//! Deleting finished jobs past their retention.

use std::fmt;
use std::time::Duration;

use jobqueue_core::engine::Pruned;

use super::context::ServiceContext;
use super::service::{Cadence, PassReport, Service};
use crate::RunnerConfig;

/// Deletes completed, failed and cancelled jobs older than the runner's
/// `retention` keeps them, every `prune_interval`.
#[derive(Debug)]
pub struct Prune {
    interval: Duration,
}

impl Prune {
    /// The service as `config` paces it.
    pub fn new(config: &RunnerConfig) -> Self {
        Prune {
            interval: config.prune_interval,
        }
    }
}

/// What a pass of [`Prune`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct PruneReport {
    /// The jobs deleted, by status.
    pub pruned: Pruned,
}

impl fmt::Display for PruneReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "pruned {} completed, {} failed, {} cancelled jobs and {} finished workflows",
            self.pruned.completed, self.pruned.failed, self.pruned.cancelled, self.pruned.workflows
        )
    }
}

impl PassReport for PruneReport {
    fn log_level(&self) -> Option<log::Level> {
        let p = &self.pruned;
        (p.completed + p.failed + p.cancelled + p.workflows > 0).then_some(log::Level::Info)
    }
}

impl Service for Prune {
    type Report = PruneReport;

    fn cadence(&self) -> Cadence {
        Cadence::every("prune", self.interval)
    }

    fn run_once(&mut self, cx: &mut ServiceContext) -> jobqueue_core::Result<PruneReport> {
        let retention = cx.shared.config.retention;
        let pruned = cx.run(|session| session.prune(&retention))?;
        Ok(PruneReport { pruned })
    }
}
