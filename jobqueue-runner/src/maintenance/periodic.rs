//! Periodic jobs: declares the registry's schedules, then fires their due
//! slots, passing again just after the next slot by the database's clock
//! (at most a minute later, when it also declares them again so they do
//! not show as orphaned). Every runner with schedules runs it; a slot
//! another runner fired first is not fired again (see
//! `jobqueue_core::engine::fire_due`).

use std::fmt;
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::context::ServiceContext;
use super::service::{Cadence, PassReport, Service};
use crate::backoff::Backoff;

/// The longest wait between passes, and how often schedules are declared.
const AT_MOST: Duration = Duration::from_secs(60);
/// Slept past a slot, so the database's `now()` has reached it.
const PAST_THE_SLOT: Duration = Duration::from_millis(5);

/// Declares the registry's schedules (again every minute) and fires their
/// due slots, passing again just after the next slot by the database's
/// clock (at most a minute later).
#[derive(Debug)]
pub struct PeriodicJobs {
    declared_at: Option<Instant>,
    backoff: Backoff,
}

impl Default for PeriodicJobs {
    fn default() -> Self {
        PeriodicJobs {
            declared_at: None,
            backoff: Backoff::new(),
        }
    }
}

/// What a pass of [`PeriodicJobs`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct PeriodicReport {
    /// Whether it declared the schedules (the first pass, then every
    /// minute).
    pub declared: bool,
    /// Jobs enqueued, by schedule.
    pub fired: Vec<(String, usize)>,
    /// Until the next pass: just past the next slot, at most a minute.
    pub next: Duration,
}

impl fmt::Display for PeriodicReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.fired.is_empty() {
            return f.write_str("no schedule due");
        }
        let fired: Vec<String> = self
            .fired
            .iter()
            .map(|(name, jobs)| format!("schedule {name}: enqueued {jobs} job(s)"))
            .collect();
        f.write_str(&fired.join("; "))
    }
}

impl PassReport for PeriodicReport {
    fn log_level(&self) -> Option<log::Level> {
        (!self.fired.is_empty()).then_some(log::Level::Info)
    }
}

impl Service for PeriodicJobs {
    type Report = PeriodicReport;

    fn cadence(&self) -> Cadence {
        Cadence::from_start("periodic jobs", AT_MOST)
    }

    fn run_once(&mut self, cx: &mut ServiceContext) -> jobqueue_core::Result<PeriodicReport> {
        let shared = Arc::clone(&cx.shared);
        let schedules = shared.registry.schedules();
        let mut declared = false;
        if self.declared_at.is_none_or(|at| at.elapsed() >= AT_MOST) {
            match cx
                .run(|session| jobqueue_core::engine::declare_schedules(session.conn(), schedules))
            {
                Ok(()) => {
                    self.declared_at = Some(Instant::now());
                    declared = true;
                }
                Err(e) => log::debug!("declaring schedules failed: {e}"),
            }
        }
        let pass = cx.run(|session| jobqueue_core::engine::fire_due(session.conn(), schedules))?;
        self.backoff.reset();
        let next = pass
            .next
            .and_then(|(next, now)| (next - now).to_std().ok())
            .map_or(AT_MOST, |until| (until + PAST_THE_SLOT).min(AT_MOST));
        Ok(PeriodicReport {
            declared,
            fired: pass.fired,
            next,
        })
    }

    fn next_after(&self, report: &PeriodicReport) -> Duration {
        report.next
    }

    fn after_error(&mut self) -> Duration {
        self.backoff.next_delay()
    }
}
