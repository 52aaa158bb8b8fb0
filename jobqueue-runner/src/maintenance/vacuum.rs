//! Vacuuming the jobs table, paced by what the vacuums reclaim
//! (`vacuum_pacing.rs`).

use std::fmt;
use std::sync::Arc;
use std::time::{Duration, Instant};

use jobqueue_core::engine::{Horizon, Vacuumed};

use super::context::ServiceContext;
use super::service::{Cadence, PassReport, Service, jittered};
use super::vacuum_pacing::VacuumPacing;
use crate::RunnerConfig;

/// Vacuums the jobs table when it holds `vacuum_min_dead` dead row versions
/// or more, every `vacuum_interval`; while vacuums reclaim little (the xmin
/// horizon is held), less and less often, looking at the horizon every
/// interval meanwhile and vacuuming at once when it moved (see
/// `vacuum_pacing.rs`).
#[derive(Debug)]
pub struct Vacuum {
    interval: Duration,
    min_dead: i64,
    pacing: VacuumPacing,
    /// When the next vacuum is due.
    next_vacuum: Instant,
    /// While backing off: when to look whether the horizon moved.
    next_look: Instant,
}

impl Vacuum {
    /// The service as `config` paces it; its first vacuum is due a
    /// `vacuum_interval` from now, give or take.
    pub fn new(config: &RunnerConfig) -> Self {
        let first = Instant::now() + jittered(config.vacuum_interval);
        Vacuum {
            interval: config.vacuum_interval,
            min_dead: config.vacuum_min_dead,
            pacing: VacuumPacing::new(config.vacuum_interval),
            next_vacuum: first,
            next_look: first,
        }
    }

    /// When the next pass is due: the next vacuum, or, while backing off,
    /// the next look at the horizon if that comes first.
    fn next_due(&self) -> Instant {
        if self.pacing.is_backing_off() {
            self.next_vacuum.min(self.next_look)
        } else {
            self.next_vacuum
        }
    }
}

/// What a pass of [`Vacuum`] did.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum VacuumReport {
    /// Vacuumed the jobs table.
    Vacuumed {
        /// The dead row versions before and after.
        vacuumed: Vacuumed,
        /// Whether it gave the empty pages at the table's end back.
        truncated: bool,
        /// How long it took.
        took: Duration,
        /// While it reclaims little: what holds the horizon, read just
        /// after (`None`: it reclaims, or the reading failed).
        held: Option<Horizon>,
    },
    /// Did not vacuum: fewer dead row versions than `vacuum_min_dead`.
    FewDead {
        /// `vacuum_min_dead`.
        min_dead: i64,
    },
    /// Backing off, looked at the horizon: still held by what held it after
    /// the last vacuum, so no vacuum yet.
    StillHeld {
        /// The horizon as read.
        horizon: Horizon,
        /// Until the vacuum the back-off is waiting for.
        next_vacuum_in: Duration,
    },
}

impl fmt::Display for VacuumReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            VacuumReport::Vacuumed {
                vacuumed,
                truncated,
                took,
                held,
            } => {
                write!(
                    f,
                    "vacuumed the jobs table in {:.0} ms ({} of {} dead row versions removed{})",
                    took.as_secs_f64() * 1000.0,
                    vacuumed.removed(),
                    vacuumed.dead_before,
                    if *truncated {
                        "; its empty end given back"
                    } else {
                        ""
                    }
                )?;
                match held {
                    Some(horizon) => write!(f, "; the xmin horizon is {horizon}"),
                    None => Ok(()),
                }
            }
            VacuumReport::FewDead { min_dead } => {
                write!(f, "no vacuum: fewer than {min_dead} dead row versions")
            }
            VacuumReport::StillHeld {
                horizon,
                next_vacuum_in,
            } => write!(
                f,
                "no vacuum yet: the xmin horizon is still {horizon}; next vacuum in {:.1} s",
                next_vacuum_in.as_secs_f64()
            ),
        }
    }
}

impl PassReport for VacuumReport {
    fn log_level(&self) -> Option<log::Level> {
        match self {
            VacuumReport::Vacuumed { .. } => Some(log::Level::Info),
            VacuumReport::StillHeld { .. } => Some(log::Level::Debug),
            VacuumReport::FewDead { .. } => None,
        }
    }
}

impl Service for Vacuum {
    type Report = VacuumReport;

    fn cadence(&self) -> Cadence {
        Cadence::every("vacuum", self.interval)
    }

    fn first_after(&self) -> Duration {
        self.next_due().saturating_duration_since(Instant::now())
    }

    fn run_once(&mut self, cx: &mut ServiceContext) -> jobqueue_core::Result<VacuumReport> {
        let now = Instant::now();
        if self.pacing.is_backing_off() && now < self.next_vacuum {
            // A look: vacuum at once if what held the horizon is gone.
            let reader = Arc::clone(&cx.shared);
            let horizon = cx.run(|session| reader.horizon.read(session, Duration::ZERO))?;
            if !self.pacing.horizon_moved(horizon.xid()) {
                self.next_look = now + jittered(self.interval);
                return Ok(VacuumReport::StillHeld {
                    horizon,
                    next_vacuum_in: self.next_vacuum.saturating_duration_since(now),
                });
            }
        }
        let started = Instant::now();
        let truncate = self.pacing.truncates(started);
        let min_dead = self.min_dead;
        let vacuumed = cx.run_unbounded(|session| session.vacuum_if_needed(min_dead, truncate))?;
        let took = started.elapsed();
        let wait = self.pacing.after(vacuumed, truncate, started);
        self.next_vacuum = Instant::now() + jittered(wait);
        let Some(vacuumed) = vacuumed else {
            return Ok(VacuumReport::FewDead { min_dead });
        };
        let mut held = None;
        if self.pacing.is_backing_off() {
            // What holds the horizon now holds what it could not remove
            // (looked at only then: nothing is added while vacuums
            // reclaim).
            let reader = Arc::clone(&cx.shared);
            let horizon = cx.run(|session| reader.horizon.read(session, Duration::ZERO));
            if let Err(e) = &horizon {
                log::debug!("reading the xmin horizon failed: {e}");
            }
            held = horizon.ok();
            self.pacing.held_by(held.as_ref().and_then(Horizon::xid));
            self.next_look = Instant::now() + jittered(self.interval);
        }
        Ok(VacuumReport::Vacuumed {
            vacuumed,
            truncated: truncate,
            took,
            held,
        })
    }

    fn next_after(&self, _: &VacuumReport) -> Duration {
        self.next_due().saturating_duration_since(Instant::now())
    }

    fn after_error(&mut self) -> Duration {
        // As after a vacuum that did not run: the interval, or the
        // back-off's wait.
        let wait = jittered(self.pacing.after(None, false, Instant::now()));
        let now = Instant::now();
        self.next_vacuum = now + wait;
        self.next_look = now + jittered(self.interval);
        self.next_due().saturating_duration_since(now)
    }
}
