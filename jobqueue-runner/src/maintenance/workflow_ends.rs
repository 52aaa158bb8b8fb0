//! Settling the ends of workflow steps that no completion released: jobs
//! failed for good or cancelled (by a handler, an operator, a rescue).

use std::fmt;
use std::time::Duration;

use jobqueue_core::engine::{DEFAULT_SETTLE_BATCH, Settled};

use super::context::ServiceContext;
use super::service::{Cadence, PassReport, Service};
use crate::RunnerConfig;

/// Settles the workflow steps whose jobs failed for good or were cancelled,
/// as their workflows say (cancel the steps after them, run them anyway,
/// or let them wait), every `rescue_interval` from the start: a repair,
/// as the ends are settled where they happen (a runner's completer right
/// after it writes one, `cancel`, a rescue that fails a job for good). A
/// pass reads every step not ended yet.
#[derive(Debug)]
pub struct WorkflowEnds {
    interval: Duration,
}

impl WorkflowEnds {
    /// The service as `config` paces it.
    pub fn new(config: &RunnerConfig) -> Self {
        WorkflowEnds {
            interval: config.rescue_interval,
        }
    }
}

/// What a pass of [`WorkflowEnds`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct EndsSettled {
    /// Steps whose failure or cancellation it settled.
    pub ended: i64,
    /// Steps it cancelled because a step they waited for did not complete.
    pub cancelled: i64,
}

impl fmt::Display for EndsSettled {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "settled {} workflow steps that failed or were cancelled; cancelled {} steps after them",
            self.ended, self.cancelled
        )
    }
}

impl PassReport for EndsSettled {
    fn log_level(&self) -> Option<log::Level> {
        (self.ended > 0).then_some(log::Level::Info)
    }
}

impl Service for WorkflowEnds {
    type Report = EndsSettled;

    fn cadence(&self) -> Cadence {
        Cadence::from_start("settling workflow ends", self.interval)
    }

    fn run_once(&mut self, cx: &mut ServiceContext) -> jobqueue_core::Result<EndsSettled> {
        let Settled {
            ended, cancelled, ..
        } = cx.run(|session| session.settle_ended(DEFAULT_SETTLE_BATCH))?;
        Ok(EndsSettled { ended, cancelled })
    }
}
