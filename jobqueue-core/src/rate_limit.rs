//! A queue's rate limit: at most so many jobs started per period by every
//! runner together, over a sliding window.
//!
//! A start is a claim: the moment a runner takes the job to run it (its
//! `claimed_at`, on the database's clock). The window lives in the queue's
//! `jobqueue_queues` row, which the claims of the queue lock and update in
//! turn (see [`crate::engine::claim`]): no window of the period's length
//! holds more starts than the limit, whatever the number of runners and
//! hosts. Bursts: after a quiet period, the whole limit may start at once;
//! then starts wait until the earliest ones leave the window. A runner
//! that dies keeps nothing: what it claimed counts in the windows of its
//! claims' times only, and those jobs start again (and count again) when
//! they are recovered.

use std::fmt;
use std::str::FromStr;
use std::time::Duration;

use diesel::prelude::*;
use diesel::sql_types::{Interval, Nullable, Text};

use crate::isolation::read_committed;
use crate::queues::QueueChange;
use crate::{Error, Result, limits, sql};

/// The most starts a rate limit allows per period.
pub const MAX_RATE_STARTS: u32 = 1_000_000;
/// The shortest period of a rate limit.
pub const MIN_RATE_PERIOD: Duration = Duration::from_millis(1);
/// The longest period of a rate limit: a day.
pub const MAX_RATE_PERIOD: Duration = Duration::from_secs(86_400);
/// The least margin of a rate limit: a claimed job's handler starts within
/// its limit's margin of the claim (a fortieth of the period, at least
/// this), or the job is handed back unstarted, and each claim counts
/// against the limit for the period plus the margin (see
/// `Claimed::rate_margins`).
pub const MIN_RATE_MARGIN: Duration = Duration::from_millis(25);

/// At most `starts` jobs of a queue started per `period`, fleet-wide.
///
/// ```
/// use std::time::Duration;
/// use jobqueue_core::RateLimit;
///
/// let limit = RateLimit::new(100, Duration::from_secs(60))?;
/// assert_eq!(limit.to_string(), "100/1m");
/// assert!(RateLimit::new(0, Duration::from_secs(1)).is_err());
/// # Ok::<(), jobqueue_core::Error>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RateLimit {
    starts: u32,
    period: Duration,
}

impl RateLimit {
    /// `starts` jobs per `period`: 1 to 1,000,000 starts per 1 ms to one
    /// day (whole milliseconds). Anything else is [`Error::InvalidOption`]
    /// naming the bound.
    pub fn new(starts: u32, period: Duration) -> Result<Self> {
        if !(1..=MAX_RATE_STARTS).contains(&starts) {
            return Err(Error::invalid(
                "rate limit",
                format!(
                    "{starts} starts per period is out of range: give 1 to {MAX_RATE_STARTS} \
                     (to stop a queue, pause it; to lift the limit, remove it)"
                ),
            ));
        }
        if !(MIN_RATE_PERIOD..=MAX_RATE_PERIOD).contains(&period)
            || !period.subsec_nanos().is_multiple_of(1_000_000)
        {
            return Err(Error::invalid(
                "rate limit",
                format!(
                    "a period of {period:?} is out of range: give whole milliseconds, 1 ms to 1 day"
                ),
            ));
        }
        Ok(RateLimit { starts, period })
    }

    /// The most jobs started per period.
    pub fn starts(&self) -> u32 {
        self.starts
    }

    /// The window's length.
    pub fn period(&self) -> Duration {
        self.period
    }

    /// The limit as the database stored it (`rate_starts`, and
    /// `rate_period` in seconds), if it is one [`RateLimit::new`] accepts
    /// (the table's constraints hold the same bounds).
    pub(crate) fn stored(starts: Option<i32>, period_secs: Option<f64>) -> Option<Self> {
        let starts = u32::try_from(starts?).ok()?;
        let millis = (period_secs? * 1000.0).round();
        let period = Duration::from_millis(millis as u64);
        RateLimit::new(starts, period).ok()
    }
}

impl RateLimit {
    /// The period as the text form writes it, in its largest whole unit:
    /// `1s`, `1m`, `90s`, `1h`, `1d`, `250ms`.
    pub fn period_text(&self) -> String {
        let millis = self.period.as_millis();
        let (size, unit) = [
            (86_400_000, "d"),
            (3_600_000, "h"),
            (60_000, "m"),
            (1000, "s"),
        ]
        .into_iter()
        .find(|(size, _)| millis.is_multiple_of(*size))
        .unwrap_or((1, "ms"));
        format!("{}{unit}", millis / size)
    }
}

impl fmt::Display for RateLimit {
    /// `starts/period`, the period in its largest whole unit: `50/1s`,
    /// `100/1m`, `10/250ms` (what [`FromStr`] reads back).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.starts, self.period_text())
    }
}

/// What a rate limit's text looks like, said after every error reading one.
const RATE_EXAMPLE: &str = "write starts per period, e.g. 50/1s, 100/1m or 10/250ms";

impl FromStr for RateLimit {
    type Err = Error;

    /// `STARTS/PERIOD`, as an operator writes it: `50/1s`, `100/1m`,
    /// `10/250ms`, `2/1.5s`. The period is numbers each with a unit
    /// (`ms`, `s`, `m` or `min`, `h`, `d`), or a unit alone for one of it
    /// (`50/s`).
    /// Text that is not a rate, or a rate [`RateLimit::new`] refuses, is
    /// [`Error::InvalidOption`] saying what to write.
    ///
    /// ```
    /// use std::time::Duration;
    /// use jobqueue_core::RateLimit;
    ///
    /// let limit: RateLimit = "100/1m".parse()?;
    /// assert_eq!(limit, RateLimit::new(100, Duration::from_secs(60))?);
    /// assert_eq!("50/s".parse::<RateLimit>()?.to_string(), "50/1s");
    /// let error = "5/fortnight".parse::<RateLimit>().unwrap_err();
    /// assert!(error.to_string().contains("not a unit"));
    /// # Ok::<(), jobqueue_core::Error>(())
    /// ```
    fn from_str(text: &str) -> Result<Self> {
        let invalid =
            |what: String| Error::invalid("rate limit", format!("{what}: {RATE_EXAMPLE}"));
        if text.trim().is_empty() {
            return Err(invalid("no rate given".to_owned()));
        }
        let Some((starts, period)) = text.trim().split_once('/') else {
            return Err(invalid(format!("`{text}` is not a rate")));
        };
        let starts: u32 = starts.trim().parse().map_err(|_| {
            invalid(format!(
                "in `{text}`, `{}` is not a whole number of starts",
                starts.trim()
            ))
        })?;
        let period =
            parse_period(period.trim()).map_err(|what| invalid(format!("in `{text}`, {what}")))?;
        RateLimit::new(starts, period)
    }
}

/// A rate's period: a duration (see [`crate::human::parse_duration`]), or
/// a unit alone for one of it (`s` is `1s`). The error says what was wrong
/// with it.
fn parse_period(text: &str) -> std::result::Result<Duration, String> {
    if !text.is_empty() && text.chars().all(|c| c.is_ascii_alphabetic()) {
        crate::human::parse_duration(&format!("1{text}"))
    } else {
        crate::human::parse_duration(text)
    }
}

/// Sets `queue`'s rate limit (`None` removes it), fleet-wide, from the
/// next claim on; a runner that learns of a queue's first limit later
/// leaves the queue out of its claims until it does (within its poll
/// interval), never claiming over the limit.
///
/// A queue no job, setting, schedule or runner names yet may be limited
/// (the limit waits for its first jobs, as a pause does), so that a new
/// environment can be set up before its first enqueue;
/// [`QueueChange::known`] says which it was, for a caller to warn of a
/// typo.
pub fn set_queue_rate_limit(
    conn: &mut PgConnection,
    queue: &str,
    limit: Option<RateLimit>,
) -> Result<QueueChange> {
    limits::check_queue(queue)?;
    let period = limit.map(|limit| diesel::pg::data_types::PgInterval {
        microseconds: i64::try_from(limit.period.as_micros()).unwrap_or(i64::MAX),
        days: 0,
        months: 0,
    });
    let starts = limit.map(|limit| i32::try_from(limit.starts).unwrap_or(i32::MAX));
    read_committed(conn, |conn| {
        Ok(diesel::sql_query(sql::QUEUE_SET_RATE)
            .bind::<Text, _>(queue)
            .bind::<Nullable<diesel::sql_types::Integer>, _>(starts)
            .bind::<Nullable<Interval>, _>(period)
            .bind::<Text, _>(crate::enqueue::NOTIFY_CHANNEL)
            .get_result::<QueueChange>(conn)?)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rate(starts: u32, period: Duration) -> RateLimit {
        RateLimit::new(starts, period).expect("a limit")
    }

    #[test]
    fn rates_read_as_starts_per_period() {
        let cases = [
            ("50/1s", rate(50, Duration::from_secs(1))),
            ("50/s", rate(50, Duration::from_secs(1))),
            ("100/1m", rate(100, Duration::from_secs(60))),
            ("100/min", rate(100, Duration::from_secs(60))),
            (" 10 / 250ms ", rate(10, Duration::from_millis(250))),
            ("2/1.5s", rate(2, Duration::from_millis(1500))),
            ("2/1s 500ms", rate(2, Duration::from_millis(1500))),
            ("7/h", rate(7, Duration::from_secs(3600))),
            ("1/1d", rate(1, Duration::from_secs(86_400))),
        ];
        for (text, limit) in cases {
            assert_eq!(text.parse::<RateLimit>().ok(), Some(limit), "{text}");
            // What it shows reads back as itself.
            assert_eq!(limit.to_string().parse::<RateLimit>().ok(), Some(limit));
        }
    }

    #[test]
    fn bad_rates_say_what_to_write() {
        let cases = [
            ("50", "e.g. 50/1s"),
            ("", "no rate given"),
            (" ", "no rate given"),
            ("0/1s", "1 to 1000000"),
            ("-5/1s", "not a whole number"),
            ("x/1s", "not a whole number"),
            ("5/0s", "1 ms to 1 day"),
            ("5/2d", "1 ms to 1 day"),
            ("5/fortnight", "`fortnight` is not a unit"),
            ("5/10", "has no unit"),
            ("5/-1s", "`-1s` is not a duration"),
            ("5/1.5ms", "whole milliseconds"),
            ("5/..s", "`..s` is not a duration"),
            ("5/1us", "1 ms to 1 day"),
        ];
        for (text, says) in cases {
            let error = text.parse::<RateLimit>().expect_err(text).to_string();
            assert!(error.contains(says), "{text}: {error}");
            assert!(error.starts_with("invalid rate limit"), "{text}: {error}");
        }
    }
}
