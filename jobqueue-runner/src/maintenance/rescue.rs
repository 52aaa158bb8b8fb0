//! Recovering the jobs whose lease expired (their runner died, froze, or
//! lost the database).

use std::fmt;
use std::time::Duration;

use super::batches::until_short;
use super::context::ServiceContext;
use super::service::{Cadence, PassReport, Service};
use crate::RunnerConfig;

/// Stale jobs recovered per statement.
const BATCH: i64 = jobqueue_core::engine::DEFAULT_RESCUE_BATCH;

/// Recovers jobs whose lease expired, every `rescue_interval`: back to
/// `pending` (the claimer is woken), failed if that was their last attempt,
/// cancelled if a cancel was asked for.
#[derive(Debug)]
pub struct Rescue {
    interval: Duration,
}

impl Rescue {
    /// The service as `config` paces it.
    pub fn new(config: &RunnerConfig) -> Self {
        Rescue {
            interval: config.rescue_interval,
        }
    }
}

/// What a pass of [`Rescue`] did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct RescueReport {
    /// Jobs back to `pending`.
    pub requeued: usize,
    /// Jobs failed: the attempt that expired was their last.
    pub failed: usize,
    /// Jobs cancelled: a cancel was asked for while they were held.
    pub cancelled: usize,
}

impl RescueReport {
    /// Jobs recovered in all.
    pub fn total(&self) -> usize {
        self.requeued + self.failed + self.cancelled
    }
}

impl fmt::Display for RescueReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "recovered {} jobs whose worker stopped renewing its lease: {} back to pending, \
             {} failed (last attempt), {} cancelled",
            self.total(),
            self.requeued,
            self.failed,
            self.cancelled
        )
    }
}

impl PassReport for RescueReport {
    fn log_level(&self) -> Option<log::Level> {
        (self.total() > 0).then_some(log::Level::Warn)
    }
}

impl Service for Rescue {
    type Report = RescueReport;

    fn cadence(&self) -> Cadence {
        Cadence::every("stale-job recovery", self.interval)
    }

    fn run_once(&mut self, cx: &mut ServiceContext) -> jobqueue_core::Result<RescueReport> {
        let mut report = RescueReport::default();
        let mut ended = Vec::new();
        // Jobs it fails or cancels are handed to the lifecycle handlers in
        // its transaction, when there are any.
        let shared = std::sync::Arc::clone(&cx.shared);
        let handlers = shared.registry.lifecycle_handlers();
        until_short(BATCH, || {
            let rescued = cx.run(|session| match handlers {
                [] => session.rescue_stale(BATCH),
                handlers => crate::lifecycle::rescue_stale(session, BATCH, handlers),
            })?;
            report.requeued += rescued.requeued.len();
            report.failed += rescued.failed.len();
            report.cancelled += rescued.cancelled.len();
            ended.extend(rescued.failed.iter().chain(&rescued.cancelled).copied());
            if !rescued.requeued.is_empty()
                && let Some(claimer) = &cx.claimer
            {
                claimer.wake();
            }
            if let Some(metrics) = &cx.shared.metrics {
                metrics.rescued.inc_by(rescued.total() as u64);
            }
            Ok(rescued.total() as i64)
        })?;
        if !ended.is_empty() {
            // Steps of workflows among them: the steps after them go as
            // their workflows say.
            cx.run(|session| session.settle_ended_of(&ended))?;
        }
        Ok(report)
    }
}
