//! Settling the ends of workflow steps that no completion released: jobs
//! failed for good or cancelled (by a handler, an operator, a rescue).

use std::fmt;
use std::time::Duration;

use jobqueue_core::JobId;
use jobqueue_core::engine::Settled;

use super::context::ServiceContext;
use super::service::{Cadence, PassReport, Service};
use crate::RunnerConfig;

/// Settles the workflow steps whose jobs failed for good or were cancelled,
/// as their workflows say (cancel the steps after them, run them anyway,
/// or let them wait), every `rescue_interval` from the start: a repair,
/// as the ends are settled where they happen (a runner's completer right
/// after it writes one, `cancel`, a rescue that fails a job for good). A
/// pass reads what changed: the live steps whose jobs failed or were
/// cancelled within the last two `rescue_interval`s and a minute (a
/// transaction that ended a job and committed that much later is left to
/// the walk), and one page of 200 live steps, going on where the pass
/// before stopped and starting again from the first after the last: its
/// cost is bounded whatever number of steps is live (a batch of a million
/// members in flight), and every live step is looked at once per `live
/// steps / 200` passes.
#[derive(Debug)]
pub struct WorkflowEnds {
    interval: Duration,
    after: Option<JobId>,
}

/// Live steps a pass of [`WorkflowEnds`] walks.
const PAGE: i64 = 200;

/// How far back a pass looks for ends: beyond two passes, the time a
/// transaction that ended a job (its `finished_at` is its start) may take
/// to commit.
const RECENT_SLACK: Duration = Duration::from_secs(60);

impl WorkflowEnds {
    /// The service as `config` paces it.
    pub fn new(config: &RunnerConfig) -> Self {
        WorkflowEnds {
            interval: config.rescue_interval,
            after: None,
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
    /// Live steps it looked at.
    pub looked: i64,
}

impl fmt::Display for EndsSettled {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "settled {} workflow steps that failed or were cancelled; cancelled {} steps after them; looked at {} live steps",
            self.ended, self.cancelled, self.looked
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
        let after = self.after;
        let recent = 2 * self.interval + RECENT_SLACK;
        let Settled {
            ended,
            cancelled,
            looked,
            next,
            ..
        } = cx.run(|session| session.settle_ended_page(after, PAGE, Some(recent)))?;
        self.after = next;
        Ok(EndsSettled {
            ended,
            cancelled,
            looked,
        })
    }
}
