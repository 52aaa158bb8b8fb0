//! The text forms of a job list's order and cursor, for links and command
//! lines: `newest`, `run_at`, `finished`; a cursor as an id, or a time (in
//! microseconds since the epoch) and an id.

use std::fmt;
use std::str::FromStr;

use chrono::{DateTime, Utc};

use super::{JobCursor, JobOrder};
use crate::{Error, JobId};

impl JobOrder {
    /// Every order.
    pub const ALL: [JobOrder; 3] = [JobOrder::Newest, JobOrder::RunAt, JobOrder::Finished];

    /// Its name: `newest`, `run_at` or `finished`.
    pub fn as_str(self) -> &'static str {
        match self {
            JobOrder::Newest => "newest",
            JobOrder::RunAt => "run_at",
            JobOrder::Finished => "finished",
        }
    }
}

impl fmt::Display for JobOrder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for JobOrder {
    type Err = Error;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        JobOrder::ALL
            .into_iter()
            .find(|order| order.as_str() == s)
            .ok_or_else(|| {
                Error::invalid(
                    "order",
                    format!("`{s}` is not an order (newest, run_at or finished)"),
                )
            })
    }
}

/// `id`, `micros.id` (after a `run_at`) or `micros~id` (before a
/// `finished_at`): what [`JobCursor`]'s `FromStr` reads back.
impl fmt::Display for JobCursor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            JobCursor::Before(id) => write!(f, "{id}"),
            JobCursor::After(at, id) => write!(f, "{}.{id}", at.timestamp_micros()),
            JobCursor::FinishedBefore(at, id) => write!(f, "{}~{id}", at.timestamp_micros()),
        }
    }
}

impl FromStr for JobCursor {
    type Err = Error;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let at = |micros: &str| DateTime::<Utc>::from_timestamp_micros(micros.parse().ok()?);
        let id = |id: &str| id.parse::<JobId>().ok();
        let cursor = if let Some((micros, rest)) = s.split_once('.') {
            at(micros)
                .zip(id(rest))
                .map(|(at, id)| JobCursor::After(at, id))
        } else if let Some((micros, rest)) = s.split_once('~') {
            at(micros)
                .zip(id(rest))
                .map(|(at, id)| JobCursor::FinishedBefore(at, id))
        } else {
            id(s).map(JobCursor::Before)
        };
        cursor.ok_or_else(|| Error::invalid("cursor", format!("`{s}` is not a page cursor")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cursors_and_orders_read_back_what_they_print() {
        let at = DateTime::<Utc>::from_timestamp_micros(1_700_000_000_123_456).expect("a time");
        let id = JobId::new();
        for cursor in [
            JobCursor::Before(id),
            JobCursor::After(at, id),
            JobCursor::FinishedBefore(at, id),
        ] {
            assert_eq!(
                cursor.to_string().parse::<JobCursor>().expect("parse"),
                cursor
            );
        }
        for order in JobOrder::ALL {
            assert_eq!(order.to_string().parse::<JobOrder>().expect("parse"), order);
        }
        for bad in ["", "x", "1.x", "x~1", "12"] {
            assert!(bad.parse::<JobCursor>().is_err(), "{bad}");
        }
        assert!("oldest".parse::<JobOrder>().is_err());
    }
}
