//! The shape every maintenance service has (see the folder's `mod.rs`).

use std::fmt;
use std::time::Duration;

use super::context::ServiceContext;

/// One kind of maintenance work, done a pass at a time.
pub trait Service: Send {
    /// What a pass did.
    type Report: PassReport;

    /// Its name, and how often it passes as a rule: the timings below
    /// default to this.
    fn cadence(&self) -> Cadence;

    /// Does one pass on `cx`'s connection, and says what it did. An error
    /// is the database's: the pass stopped there.
    fn run_once(&mut self, cx: &mut ServiceContext) -> jobqueue_core::Result<Self::Report>;

    /// How long after the runner starts its first pass is due.
    fn first_after(&self) -> Duration {
        self.cadence().first_after()
    }

    /// How long after a pass that reported `report` the next is due.
    fn next_after(&self, report: &Self::Report) -> Duration {
        let _ = report;
        jittered(self.cadence().interval)
    }

    /// How long after a pass that failed the next is due.
    fn after_error(&mut self) -> Duration {
        jittered(self.cadence().interval)
    }
}

/// A [`Service`]'s name and pace: every `interval` (give or take 10 %:
/// runners started together do not pass in step), the first pass at once
/// or about an interval after the runner starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct Cadence {
    /// The service's name, in log lines.
    pub name: &'static str,
    /// How often it passes, as a rule (the runner's setting for it).
    pub interval: Duration,
    /// Whether its first pass is due as the runner starts.
    pub from_start: bool,
}

impl Cadence {
    /// `name`, passing every `interval`, the first time about an interval
    /// after the runner starts.
    pub fn every(name: &'static str, interval: Duration) -> Self {
        Cadence {
            name,
            interval,
            from_start: false,
        }
    }

    /// `name`, passing as the runner starts, then every `interval`.
    pub fn from_start(name: &'static str, interval: Duration) -> Self {
        Cadence {
            from_start: true,
            ..Cadence::every(name, interval)
        }
    }

    /// How long after the runner starts the first pass is due.
    fn first_after(&self) -> Duration {
        if self.from_start {
            Duration::ZERO
        } else {
            jittered(self.interval)
        }
    }
}

/// What a pass of a [`Service`] reports: a line for the log.
pub trait PassReport: fmt::Display + fmt::Debug {
    /// The level its line is logged at; `None`: nothing worth a line.
    fn log_level(&self) -> Option<log::Level>;
}

/// `interval`, give or take 10 %: runners started together do not pass in
/// step.
pub(super) fn jittered(interval: Duration) -> Duration {
    interval.mul_f64(0.9 + fastrand::f64() * 0.2)
}

/// `bytes` for a log line: `12.3 MB`, `48 kB`.
pub(super) fn size(bytes: i64) -> String {
    let bytes = bytes as f64;
    if bytes >= 1e6 {
        format!("{:.1} MB", bytes / 1e6)
    } else {
        format!("{:.0} kB", bytes / 1e3)
    }
}
