//! Per-key concurrency of a queue: at most N jobs of one concurrency key
//! at once, fleet-wide, or one at a time in enqueue order.
//!
//! A job carries a key when enqueued with one ([`crate::JobOptions::concurrency_key`],
//! or its type's [`crate::Job::concurrency_key`]). In a queue with a key
//! limit, a keyed job is admitted by its enqueue when fewer than the limit
//! of its key's jobs are admitted and unfinished and none waits; otherwise
//! it is inserted [`crate::JobStatus::Waiting`] and admitted (to
//! `pending`) by the runners once its key has room. Unkeyed jobs of the
//! queue are not limited. An admitted job keeps its place through retries, snoozes
//! and recoveries of its runner's lease: the ones behind it wait until it
//! completes, fails for good or is cancelled.

use std::fmt;
use std::str::FromStr;

use diesel::prelude::*;
use diesel::sql_types::{Bool, Integer, Nullable, Text};

use crate::isolation::read_committed;
use crate::limits::{self, MAX_KEY_LIMIT};
use crate::queues::QueueChange;
use crate::{Error, Result, sql};

/// A queue's limit per concurrency key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KeyLimit {
    per_key: u32,
    ordered: bool,
}

impl KeyLimit {
    /// At most `per_key` jobs of one key at once, 1 to 10,000; the key's
    /// jobs start in no particular order among themselves.
    pub fn per_key(per_key: u32) -> Result<Self> {
        if per_key == 0 || per_key > MAX_KEY_LIMIT as u32 {
            return Err(invalid(format!(
                "{per_key} jobs per key is not a limit: give 1 to {MAX_KEY_LIMIT} (to stop a \
                 queue, pause it; to lift the limit, remove it)"
            )));
        }
        Ok(KeyLimit {
            per_key,
            ordered: false,
        })
    }

    /// One job of a key at a time, in enqueue order: the next starts only
    /// once the one before it completed, failed for good or was cancelled.
    pub fn ordered() -> Self {
        KeyLimit {
            per_key: 1,
            ordered: true,
        }
    }

    /// Most jobs of one key at once.
    pub fn jobs_per_key(&self) -> u32 {
        self.per_key
    }

    /// Whether a key's jobs run one at a time in enqueue order.
    pub fn is_ordered(&self) -> bool {
        self.ordered
    }

    /// The limit as stored (`key_limit`, `key_ordered`).
    pub(crate) fn stored(limit: Option<i32>, ordered: bool) -> Option<Self> {
        let per_key = u32::try_from(limit?).ok()?;
        Some(KeyLimit { per_key, ordered })
    }
}

fn invalid(reason: String) -> Error {
    Error::invalid("key limit", reason)
}

impl fmt::Display for KeyLimit {
    /// `5 per key`, or `ordered`; reads back with [`FromStr`].
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.ordered {
            f.write_str("ordered")
        } else {
            write!(f, "{} per key", self.per_key)
        }
    }
}

impl FromStr for KeyLimit {
    type Err = Error;

    /// `5`, `5 per key`, or `ordered`.
    fn from_str(text: &str) -> Result<Self> {
        let text = text.trim();
        if text == "ordered" {
            return Ok(KeyLimit::ordered());
        }
        let number = text.strip_suffix("per key").unwrap_or(text).trim();
        if number.is_empty() {
            return Err(invalid(
                "no limit given: write the most jobs of one key at once (e.g. 5), or `ordered`"
                    .into(),
            ));
        }
        match number.parse::<i64>() {
            Ok(n) if n >= 1 => KeyLimit::per_key(u32::try_from(n).unwrap_or(u32::MAX)),
            Ok(n) => Err(invalid(format!(
                "{n} jobs per key is not a limit: give 1 to {MAX_KEY_LIMIT} (to stop a queue, \
                 pause it; to lift the limit, remove it)"
            ))),
            Err(_) => Err(invalid(format!(
                "`{text}` is not a whole number of jobs per key (e.g. 5), nor `ordered`"
            ))),
        }
    }
}

/// Sets `queue`'s key limit (`None` removes it), fleet-wide, and admits
/// at once the waiting jobs a raised or removed limit makes room for. A
/// lowered limit takes no job back: admissions stop until fewer of a key's
/// jobs are admitted. Keyed jobs enqueued before a first limit was set are
/// already due and count against it; those enqueued after wait for room.
///
/// A queue no job, setting, schedule or runner names yet may be limited
/// (its first keyed jobs then wait for their key's room), so that a new
/// environment can be set up before its first enqueue;
/// [`QueueChange::known`] says which it was, for a caller to warn of a
/// typo.
pub fn set_queue_key_limit(
    conn: &mut PgConnection,
    queue: &str,
    limit: Option<KeyLimit>,
) -> Result<QueueChange> {
    limits::check_queue(queue)?;
    let per_key = limit.map(|limit| i32::try_from(limit.per_key).unwrap_or(MAX_KEY_LIMIT));
    let ordered = limit.is_some_and(|limit| limit.ordered);
    read_committed(conn, |conn| {
        let change = diesel::sql_query(sql::QUEUE_SET_KEY_LIMIT)
            .bind::<Text, _>(queue)
            .bind::<Nullable<Integer>, _>(per_key)
            .bind::<Bool, _>(ordered)
            .get_result::<QueueChange>(conn)?;
        crate::admission::admit_queue(conn, queue)?;
        Ok(change)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn limits_read_back_as_shown() {
        for text in ["1", "5", "5 per key", "10000", "ordered", " 7 "] {
            let limit: KeyLimit = text.parse().expect(text);
            assert_eq!(limit.to_string().parse::<KeyLimit>().ok(), Some(limit));
        }
        assert_eq!("3".parse::<KeyLimit>().ok(), KeyLimit::per_key(3).ok());
        assert!("ordered".parse::<KeyLimit>().expect("ordered").is_ordered());
    }

    #[test]
    fn bad_limits_say_what_to_write() {
        let cases = [
            ("0", "give 1 to 10000"),
            ("-2", "give 1 to 10000"),
            ("10001", "give 1 to 10000"),
            ("", "no limit given"),
            ("five", "not a whole number"),
            ("1.5", "not a whole number"),
        ];
        for (text, says) in cases {
            let error = text.parse::<KeyLimit>().expect_err(text).to_string();
            assert!(error.contains(says), "{text}: {error}");
            assert!(error.contains("key limit"), "{text}: {error}");
        }
    }
}
