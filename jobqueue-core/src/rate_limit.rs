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
use std::time::Duration;

use diesel::prelude::*;
use diesel::sql_types::{Interval, Nullable, Text};

use crate::isolation::read_committed;
use crate::queues::{QueueChange, unknown};
use crate::{Error, Result, limits, sql};

/// The most starts a rate limit allows per period.
pub const MAX_RATE_STARTS: u32 = 1_000_000;
/// The shortest period of a rate limit.
pub const MIN_RATE_PERIOD: Duration = Duration::from_millis(1);
/// The longest period of a rate limit: a day.
pub const MAX_RATE_PERIOD: Duration = Duration::from_secs(86_400);

/// At most `starts` jobs of a queue started per `period`, fleet-wide.
///
/// ```
/// use std::time::Duration;
/// use jobqueue_core::RateLimit;
///
/// let limit = RateLimit::new(100, Duration::from_secs(60))?;
/// assert_eq!(limit.to_string(), "100/60s");
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
    /// day (whole milliseconds). Anything else is [`Error::InvalidInput`]
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

impl fmt::Display for RateLimit {
    /// `starts/period`, the period in the largest whole unit: `50/1s`,
    /// `100/60s`, `10/250ms`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let millis = self.period.as_millis();
        if millis.is_multiple_of(1000) {
            write!(f, "{}/{}s", self.starts, millis / 1000)
        } else {
            write!(f, "{}/{millis}ms", self.starts)
        }
    }
}

/// Sets `queue`'s rate limit (`None` removes it), fleet-wide, from the
/// next claim on; a runner that learns of a queue's first limit later
/// leaves the queue out of its claims until it does (within its poll
/// interval), never claiming over the limit.
///
/// The queue must be known (it has settings, jobs, a schedule or a runner
/// that names it): a limit on a name nothing uses is most likely a typo,
/// and is [`Error::UnknownQueue`] with the known queues.
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
        let change = diesel::sql_query(sql::QUEUE_SET_RATE)
            .bind::<Text, _>(queue)
            .bind::<Nullable<diesel::sql_types::Integer>, _>(starts)
            .bind::<Nullable<Interval>, _>(period)
            .bind::<Text, _>(crate::enqueue::NOTIFY_CHANNEL)
            .get_result::<QueueChange>(conn)?;
        if change.known {
            Ok(change)
        } else {
            Err(unknown(conn, queue))
        }
    })
}
