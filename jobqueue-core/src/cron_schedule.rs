//! A cron expression in a time zone, and the slots it gives between two
//! instants.
//!
//! Expressions are parsed by `croner` (5 fields, or 6 with seconds first),
//! time zones by `chrono-tz`. Around daylight-saving changes a slot fires
//! once: a local time skipped by a spring-forward fires at the first
//! instant after the gap (02:30 on a day that jumps from 02:00 to 03:00
//! fires at 03:00), and a local time repeated by a fall-back fires at its
//! first occurrence only.

use std::str::FromStr;

use chrono::{DateTime, Timelike, Utc};
use chrono_tz::Tz;

use crate::{Error, Result};

/// A parsed schedule: when its slots fall.
#[derive(Debug, Clone)]
pub struct CronSchedule {
    cron: croner::Cron,
    time_zone: Tz,
}

impl CronSchedule {
    /// Parses `expression` (e.g. `0 3 * * *`, or `*/10 * * * * *` with
    /// seconds), in `time_zone` (an IANA name such as `Europe/Paris`; UTC
    /// if `None`). The error names what is wrong.
    pub fn parse(expression: &str, time_zone: Option<&str>) -> Result<Self> {
        let cron = croner::Cron::from_str(expression).map_err(|e| {
            Error::invalid(
                "cron expression",
                format!(
                    "`{expression}` is not a cron expression ({e}); give 5 fields \
                     (minute hour day-of-month month day-of-week, e.g. `0 3 * * *`) or 6 \
                     with seconds first"
                ),
            )
        })?;
        let time_zone = match time_zone {
            None => Tz::UTC,
            Some(name) => name.parse::<Tz>().map_err(|_| {
                Error::invalid(
                    "time zone",
                    format!("`{name}` is not an IANA time zone name (e.g. Europe/Paris, UTC)"),
                )
            })?,
        };
        Ok(CronSchedule { cron, time_zone })
    }

    /// The first slot strictly after `after` (slots fall on whole seconds).
    pub fn next_after(&self, after: DateTime<Utc>) -> Option<DateTime<Utc>> {
        let whole = after.with_nanosecond(0).unwrap_or(after);
        self.cron
            .find_next_occurrence(&whole.with_timezone(&self.time_zone), false)
            .ok()
            .map(|slot| slot.with_timezone(&Utc))
    }

    /// The slots in `(after, until]`, oldest first; at most the newest
    /// `most` of them.
    pub fn slots_between(
        &self,
        after: DateTime<Utc>,
        until: DateTime<Utc>,
        most: usize,
    ) -> Vec<DateTime<Utc>> {
        let mut slots = std::collections::VecDeque::new();
        let mut cursor = after;
        while let Some(slot) = self.next_after(cursor) {
            if slot > until {
                break;
            }
            if slots.len() == most {
                slots.pop_front();
            }
            slots.push_back(slot);
            cursor = slot;
        }
        slots.into()
    }
}

#[cfg(test)]
mod tests {

    use super::*;

    fn utc(text: &str) -> DateTime<Utc> {
        DateTime::parse_from_rfc3339(text)
            .expect("a time")
            .with_timezone(&Utc)
    }

    /// The slots of a daily 02:30 in Paris between two instants.
    fn paris_at_0230_between(from: &str, to: &str) -> Vec<DateTime<Utc>> {
        let daily = CronSchedule::parse("30 2 * * *", Some("Europe/Paris")).expect("parse");
        daily.slots_between(utc(from), utc(to), 100)
    }

    #[test]
    fn a_slot_in_a_spring_forward_gap_fires_once_after_it() {
        // Paris, 2026-03-29: 02:00 CET jumps to 03:00 CEST.
        assert_eq!(
            paris_at_0230_between("2026-03-27T12:00:00Z", "2026-03-31T12:00:00Z"),
            [
                utc("2026-03-28T01:30:00Z"), // 02:30 CET
                utc("2026-03-29T01:00:00Z"), // 03:00 CEST, right after the gap
                utc("2026-03-30T00:30:00Z"), // 02:30 CEST
                utc("2026-03-31T00:30:00Z"),
            ]
        );
    }

    #[test]
    fn a_slot_in_a_fall_back_repeat_fires_once() {
        // Paris, 2026-10-25: 03:00 CEST goes back to 02:00 CET.
        assert_eq!(
            paris_at_0230_between("2026-10-24T12:00:00Z", "2026-10-26T12:00:00Z"),
            [utc("2026-10-25T00:30:00Z"), utc("2026-10-26T01:30:00Z")]
        );
    }

    #[test]
    fn slots_fall_on_whole_seconds() {
        let every_second = CronSchedule::parse("* * * * * *", None).expect("parse");
        let after = utc("2026-01-01T00:00:05.528Z");
        assert_eq!(
            every_second.next_after(after),
            Some(utc("2026-01-01T00:00:06Z"))
        );
    }

    #[test]
    fn seconds_and_the_newest_few() {
        let every_second = CronSchedule::parse("* * * * * *", None).expect("parse");
        let slots =
            every_second.slots_between(utc("2026-01-01T00:00:00Z"), utc("2026-01-01T00:00:10Z"), 3);
        assert_eq!(
            slots,
            [
                utc("2026-01-01T00:00:08Z"),
                utc("2026-01-01T00:00:09Z"),
                utc("2026-01-01T00:00:10Z"),
            ]
        );
    }

    #[test]
    fn bad_input_says_what_is_wrong() {
        let err = CronSchedule::parse("61 * * * *", None).expect_err("minute 61");
        assert!(
            err.to_string()
                .contains("`61 * * * *` is not a cron expression"),
            "{err}"
        );
        let err = CronSchedule::parse("0 3 * * *", Some("Mars/Olympus")).expect_err("no such zone");
        assert!(
            err.to_string()
                .contains("`Mars/Olympus` is not an IANA time zone"),
            "{err}"
        );
    }
}
