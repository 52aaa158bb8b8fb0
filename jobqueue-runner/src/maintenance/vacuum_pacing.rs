//! How often the vacuum service (`vacuum.rs`) vacuums the jobs table: every
//! `vacuum_interval` while vacuums reclaim, less and less often while they
//! cannot.
//!
//! A vacuum removes only the row versions that died before the oldest
//! snapshot still open anywhere (the xmin horizon). A long report, a stuck
//! client's open transaction, a replication slot or a forgotten prepared
//! transaction hold the horizon back; dead versions then pile up past the
//! threshold and every vacuum scans the table and its indexes only to
//! remove nothing. So after a vacuum that removed less than half of the
//! dead versions, the next waits twice as long as the last, up to
//! [`MOST`]; the first such vacuum is logged as a warning, and the first
//! that reclaims again as an info line. While it waits, the service looks
//! at the horizon every `vacuum_interval` (`jobqueue_core::engine::xmin_horizon`,
//! one cheap read of `pg_stat_activity` and friends): once the holder seen
//! after the last vacuum is gone, it vacuums at once instead of waiting out
//! the back-off, so the dead versions go within an interval of the horizon
//! moving on.
//! While vacuums reclaim, nothing is looked at.
//!
//! A vacuum shortens the table by the empty pages at its end only now and
//! then ([`TRUNCATE_EVERY`]): that step takes an `ACCESS EXCLUSIVE` lock of
//! the table, and every claim and completion waits behind it. Under a
//! steady load the end of the table empties and fills again between two
//! vacuums (new rows go to new pages until a vacuum has recorded the free
//! space), so truncating at each vacuum stalled the whole queue every few
//! seconds for pages soon written again. What a long transaction left
//! behind still goes: the vacuums of the minute after one finds the
//! horizon moved on give back the end of the table it emptied, and each
//! truncating vacuum after them whatever end is empty then.

use std::time::{Duration, Instant};

use jobqueue_core::engine::Vacuumed;

/// The longest wait between vacuums while they reclaim little: as often as
/// autovacuum looks at a table (`autovacuum_naptime`'s default), so the
/// dead versions go at most a minute after the horizon moves on.
pub(crate) const MOST: Duration = Duration::from_secs(60);

/// The least time between two vacuums that shorten the table.
pub(crate) const TRUNCATE_EVERY: Duration = Duration::from_secs(300);

/// The vacuum's pace: its interval, how far it backed off, and when it
/// shortens the table.
#[derive(Debug)]
pub(crate) struct VacuumPacing {
    interval: Duration,
    /// The wait before the next vacuum while backing off (`None`: not).
    backing_off: Option<Duration>,
    /// When a vacuum last shortened the table (`None`: none yet).
    truncated_at: Option<Instant>,
    /// Until when every vacuum shortens the table: a minute after the
    /// first that reclaimed again after backing off.
    truncating_until: Option<Instant>,
    /// The transaction id the xmin horizon was held at just after the last
    /// vacuum, if it reclaimed little (`jobqueue_core::engine::Horizon::xid`;
    /// `None`: free, or not seen).
    held_by: Option<i64>,
}

impl VacuumPacing {
    pub(crate) fn new(interval: Duration) -> Self {
        VacuumPacing {
            interval,
            backing_off: None,
            truncated_at: None,
            truncating_until: None,
            held_by: None,
        }
    }

    /// Notes the horizon's holder seen just after a vacuum that reclaimed
    /// little: what holds the versions it could not remove.
    pub(crate) fn held_by(&mut self, horizon: Option<i64>) {
        self.held_by = horizon;
    }

    /// Whether it is backing off: waiting longer than the interval for the
    /// horizon to move.
    pub(crate) fn is_backing_off(&self) -> bool {
        self.backing_off.is_some()
    }

    /// Whether, while backing off, `horizon` (the holder seen now) tells that
    /// the horizon moved on since the last vacuum: nothing holds it, or
    /// something else does. Not while not backing off.
    pub(crate) fn horizon_moved(&self, horizon: Option<i64>) -> bool {
        self.is_backing_off() && (horizon.is_none() || horizon != self.held_by)
    }

    /// Whether the vacuum about to run at `now` should shorten the table:
    /// the first one; every one while backing off and for a minute after
    /// (while the horizon is held no page at the end is empty, and a vacuum
    /// that finds none takes no lock; the one that finds the horizon moved
    /// on empties the end, but rows inserted while it ran may sit there
    /// until the next); and otherwise one at least [`TRUNCATE_EVERY`] after
    /// the last that did.
    pub(crate) fn truncates(&self, now: Instant) -> bool {
        self.backing_off.is_some()
            || self.truncating_until.is_some_and(|until| now < until)
            || self
                .truncated_at
                .is_none_or(|at| now.saturating_duration_since(at) >= TRUNCATE_EVERY)
    }

    /// How long to wait before the next vacuum, given what the last one did
    /// (`None`: it did not run, too few dead versions) and whether it was
    /// to shorten the table, begun at `began`; logs the changes.
    pub(crate) fn after(
        &mut self,
        vacuumed: Option<Vacuumed>,
        truncated: bool,
        began: Instant,
    ) -> Duration {
        let Some(v) = vacuumed else {
            return self.backing_off.unwrap_or(self.interval);
        };
        if truncated {
            self.truncated_at = Some(began);
        }
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
                self.truncating_until = Some(began + MOST);
                log::info!(
                    "vacuum reclaims again ({} dead row versions removed); back to every {:.1} s",
                    v.removed(),
                    self.interval.as_secs_f64()
                );
            }
            self.interval
        }
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

    impl VacuumPacing {
        fn after_plain(&mut self, vacuumed: Option<Vacuumed>) -> Duration {
            self.after(vacuumed, false, Instant::now())
        }
    }

    #[test]
    fn shortens_the_table_at_the_first_vacuum_and_then_every_five_minutes_of_those_that_ran() {
        let mut pacing = VacuumPacing::new(Duration::from_secs(10));
        let start = Instant::now();
        assert!(pacing.truncates(start));
        // Too few dead versions: no vacuum ran, so the truncation is still due.
        pacing.after(None, true, start);
        assert!(pacing.truncates(start + Duration::from_secs(10)));
        let at = start + Duration::from_secs(10);
        pacing.after(vacuumed(30_000, 100), true, at);
        assert!(!pacing.truncates(at + Duration::from_secs(10)));
        assert!(!pacing.truncates(at + TRUNCATE_EVERY - Duration::from_secs(1)));
        assert!(pacing.truncates(at + TRUNCATE_EVERY));
        // A vacuum that did not truncate does not move the clock.
        pacing.after(vacuumed(30_000, 100), false, at + TRUNCATE_EVERY);
        assert!(pacing.truncates(at + TRUNCATE_EVERY));
    }

    #[test]
    fn vacuums_while_backing_off_and_for_a_minute_after_shorten_the_table() {
        let mut pacing = VacuumPacing::new(Duration::from_secs(10));
        let at = Instant::now();
        pacing.after(vacuumed(30_000, 100), true, at);
        assert!(!pacing.truncates(at + Duration::from_secs(10)));
        // The horizon is held: the next vacuums try, and the first that
        // reclaims again gives back the end it emptied.
        pacing.after(
            vacuumed(30_000, 29_000),
            false,
            at + Duration::from_secs(10),
        );
        assert!(pacing.truncates(at + Duration::from_secs(30)));
        // The vacuums of the next minute shorten it too, then every five
        // minutes again.
        let reclaimed = at + Duration::from_secs(30);
        pacing.after(vacuumed(40_000, 100), true, reclaimed);
        assert!(pacing.truncates(reclaimed + Duration::from_secs(10)));
        pacing.after(
            vacuumed(30_000, 100),
            true,
            reclaimed + Duration::from_secs(50),
        );
        assert!(!pacing.truncates(reclaimed + MOST));
        assert!(!pacing.truncates(reclaimed + Duration::from_secs(200)));
    }

    #[test]
    fn the_horizon_moved_once_its_holder_is_gone() {
        let mut pacing = VacuumPacing::new(Duration::from_secs(10));
        pacing.after_plain(vacuumed(30_000, 100));
        // Not backing off: the interval decides, whatever the horizon.
        assert!(!pacing.horizon_moved(None));
        pacing.after_plain(vacuumed(30_000, 29_000));
        pacing.held_by(Some(700));
        assert!(pacing.is_backing_off());
        assert!(!pacing.horizon_moved(Some(700)), "the same holder");
        assert!(pacing.horizon_moved(Some(950)), "another holder");
        assert!(pacing.horizon_moved(None), "no holder");
        // Not seen after the vacuum: any holder seen now may be new.
        pacing.after_plain(vacuumed(30_000, 29_000));
        pacing.held_by(None);
        assert!(pacing.horizon_moved(Some(700)));
    }

    #[test]
    fn backs_off_while_vacuums_reclaim_little_and_returns_when_they_do() {
        let mut pacing = VacuumPacing::new(Duration::from_secs(10));
        assert_eq!(
            pacing.after_plain(vacuumed(30_000, 100)),
            Duration::from_secs(10)
        );
        assert_eq!(
            pacing.after_plain(vacuumed(30_000, 29_000)),
            Duration::from_secs(20)
        );
        assert_eq!(pacing.after_plain(None), Duration::from_secs(20));
        assert_eq!(
            pacing.after_plain(vacuumed(40_000, 39_000)),
            Duration::from_secs(40)
        );
        for _ in 0..10 {
            pacing.after_plain(vacuumed(40_000, 39_000));
        }
        assert_eq!(pacing.after_plain(vacuumed(40_000, 39_000)), MOST);
        assert!(pacing.is_backing_off());
        assert_eq!(
            pacing.after_plain(vacuumed(40_000, 10)),
            Duration::from_secs(10)
        );
        assert!(!pacing.is_backing_off());
    }
}
