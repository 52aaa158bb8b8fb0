//! Taking back the jobs set aside as unhandled that this runner handles.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use super::batches::until_short;
use super::context::ServiceContext;
use super::service::{Cadence, PassReport, Service};
use crate::RunnerConfig;

/// Jobs taken back per statement.
const BATCH: i64 = jobqueue_core::engine::DEFAULT_PROMOTE_BATCH;

/// Takes back jobs set aside as unhandled whose type this runner handles,
/// in the queues it works: at once when the runner starts (they were set
/// aside while it was not running), then every `rescue_interval`.
#[derive(Debug)]
pub struct Reclaim {
    interval: Duration,
}

impl Reclaim {
    /// The service as `config` paces it.
    pub fn new(config: &RunnerConfig) -> Self {
        Reclaim {
            interval: config.rescue_interval,
        }
    }
}

/// What a pass of [`Reclaim`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct Reclaimed {
    /// Jobs back to `pending`.
    pub jobs: i64,
}

impl fmt::Display for Reclaimed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "took back {} jobs set aside as unhandled: this runner handles them",
            self.jobs
        )
    }
}

impl PassReport for Reclaimed {
    fn log_level(&self) -> Option<log::Level> {
        (self.jobs > 0).then_some(log::Level::Info)
    }
}

impl Service for Reclaim {
    type Report = Reclaimed;

    fn cadence(&self) -> Cadence {
        Cadence::from_start("taking back unhandled jobs", self.interval)
    }

    fn run_once(&mut self, cx: &mut ServiceContext) -> jobqueue_core::Result<Reclaimed> {
        let shared = Arc::clone(&cx.shared);
        let (types, queues) = (&shared.job_types, &shared.config.queues);
        let jobs = until_short(BATCH, || {
            cx.run(|session| session.reclaim_unhandled(types, queues, BATCH))
        })?;
        Ok(Reclaimed { jobs })
    }
}
