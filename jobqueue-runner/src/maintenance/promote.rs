//! Moving scheduled jobs that became due to `pending`.

use std::fmt;
use std::time::Duration;

use super::batches::until_short;
use super::context::ServiceContext;
use super::service::{Cadence, PassReport, Service};
use crate::RunnerConfig;

/// Jobs moved to `pending` per statement.
const BATCH: i64 = jobqueue_core::engine::DEFAULT_PROMOTE_BATCH;

/// Moves scheduled jobs (delayed, or waiting out a retry's backoff) whose
/// time came to `pending`, every `poll_interval` from the runner's start;
/// the statement's notification wakes their queues' runners.
#[derive(Debug)]
pub struct Promote {
    interval: Duration,
}

impl Promote {
    /// The service as `config` paces it.
    pub fn new(config: &RunnerConfig) -> Self {
        Promote {
            interval: config.poll_interval,
        }
    }
}

/// What a pass of [`Promote`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct Promoted {
    /// Jobs moved to `pending`.
    pub jobs: i64,
}

impl fmt::Display for Promoted {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "moved {} due scheduled jobs to pending", self.jobs)
    }
}

impl PassReport for Promoted {
    fn log_level(&self) -> Option<log::Level> {
        (self.jobs > 0).then_some(log::Level::Debug)
    }
}

impl Service for Promote {
    type Report = Promoted;

    fn cadence(&self) -> Cadence {
        Cadence::from_start("moving due scheduled jobs", self.interval)
    }

    fn run_once(&mut self, cx: &mut ServiceContext) -> jobqueue_core::Result<Promoted> {
        let jobs = until_short(BATCH, || cx.run(|session| session.promote_due(BATCH)))?;
        Ok(Promoted { jobs })
    }
}
