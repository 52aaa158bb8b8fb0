//! How often maintenance vacuums the jobs table: every `vacuum_interval`
//! while vacuums reclaim, less and less often while they cannot.
//!
//! A vacuum removes only the row versions that died before the oldest
//! snapshot still open anywhere (the xmin horizon). A long report, a stuck
//! client's open transaction, a replication slot or a forgotten prepared
//! transaction hold the horizon back; dead versions then pile up past the
//! threshold and every vacuum scans the table and its indexes only to
//! remove nothing. So after a vacuum that removed less than half of the
//! dead versions, the next waits twice as long as the last, up to
//! [`MOST`]; the first such vacuum is logged as a warning, and the first
//! that reclaims again as an info line.

use std::time::Duration;

use jobqueue_core::Vacuumed;

/// The longest wait between vacuums while they reclaim little: as often as
/// autovacuum looks at a table (`autovacuum_naptime`'s default), so the
/// dead versions go at most a minute after the horizon moves on.
pub(crate) const MOST: Duration = Duration::from_secs(60);

/// The vacuum's pace: its interval, and how far it backed off.
#[derive(Debug)]
pub(crate) struct VacuumPacing {
    interval: Duration,
    /// The wait before the next vacuum while backing off (`None`: not).
    backing_off: Option<Duration>,
}

impl VacuumPacing {
    pub(crate) fn new(interval: Duration) -> Self {
        VacuumPacing {
            interval,
            backing_off: None,
        }
    }

    /// How long to wait before the next vacuum, given what the last one did
    /// (`None`: it did not run, too few dead versions); logs the changes.
    pub(crate) fn after(&mut self, vacuumed: Option<Vacuumed>) -> Duration {
        let Some(v) = vacuumed else {
            return self.backing_off.unwrap_or(self.interval);
        };
        if v.reclaimed_little() {
            if self.backing_off.is_none() {
                log::warn!(
                    "vacuum removed {} of {} dead row versions of the jobs table: an open \
                     transaction, replication slot or prepared transaction holds the xmin \
                     horizon back (`jobqueue doctor` names it); vacuuming less often until \
                     it moves",
                    v.removed(),
                    v.dead_before
                );
            }
            let wait = self.backing_off.unwrap_or(self.interval).saturating_mul(2);
            let wait = wait.min(MOST.max(self.interval));
            self.backing_off = Some(wait);
            wait
        } else {
            if self.backing_off.take().is_some() {
                log::info!(
                    "vacuum reclaims again ({} dead row versions removed); back to every {:.1} s",
                    v.removed(),
                    self.interval.as_secs_f64()
                );
            }
            self.interval
        }
    }

    /// Whether it is backing off now.
    #[cfg(test)]
    fn is_backing_off(&self) -> bool {
        self.backing_off.is_some()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vacuumed(dead_before: i64, dead_after: i64) -> Option<Vacuumed> {
        Some(Vacuumed {
            dead_before,
            dead_after,
        })
    }

    #[test]
    fn backs_off_while_vacuums_reclaim_little_and_returns_when_they_do() {
        let mut pacing = VacuumPacing::new(Duration::from_secs(10));
        assert_eq!(pacing.after(vacuumed(30_000, 100)), Duration::from_secs(10));
        assert_eq!(
            pacing.after(vacuumed(30_000, 29_000)),
            Duration::from_secs(20)
        );
        assert_eq!(pacing.after(None), Duration::from_secs(20));
        assert_eq!(
            pacing.after(vacuumed(40_000, 39_000)),
            Duration::from_secs(40)
        );
        for _ in 0..10 {
            pacing.after(vacuumed(40_000, 39_000));
        }
        assert_eq!(pacing.after(vacuumed(40_000, 39_000)), MOST);
        assert!(pacing.is_backing_off());
        assert_eq!(pacing.after(vacuumed(40_000, 10)), Duration::from_secs(10));
        assert!(!pacing.is_backing_off());
    }
}
