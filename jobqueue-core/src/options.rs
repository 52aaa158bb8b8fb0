//! Per-enqueue options: priority, queue, when due, attempts, unique key.

use std::time::Duration;

use chrono::{DateTime, Utc};

/// When a job becomes due (not "schedule": that word names periodic
/// jobs).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) enum Due {
    /// Due at once (the database's `now()`).
    #[default]
    Now,
    /// Due at this instant.
    At(DateTime<Utc>),
    /// Due this long after the database's `now()` at insert time.
    After(Duration),
}

/// Options for one enqueue; anything left unset takes the job type's default.
///
/// Setters never fail: every value is checked when the job is built
/// ([`crate::NewJob::new`]), and a bad one is an [`crate::Error::InvalidOption`]
/// naming the field.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct JobOptions {
    pub(crate) priority: Option<i32>,
    pub(crate) queue: Option<String>,
    pub(crate) due: Due,
    pub(crate) max_attempts: Option<i32>,
    pub(crate) unique_key: Option<String>,
    pub(crate) max_payload_bytes: Option<usize>,
}

impl JobOptions {
    /// Options with every field unset.
    pub fn new() -> Self {
        Self::default()
    }

    /// Priority, `0..=1000`; higher runs first. Default: the job type's (100).
    pub fn priority(mut self, priority: i32) -> Self {
        self.priority = Some(priority);
        self
    }

    /// Named queue, 1 to 64 characters of `[A-Za-z0-9_.:-]`. Default: the job
    /// type's (`default`).
    pub fn queue(mut self, queue: impl Into<String>) -> Self {
        self.queue = Some(queue.into());
        self
    }

    /// Not before this instant. Replaces an earlier `delay`.
    pub fn run_at(mut self, at: DateTime<Utc>) -> Self {
        self.due = Due::At(at);
        self
    }

    /// Not before this long after the database's `now()`. Replaces an earlier `run_at`.
    pub fn delay(mut self, delay: Duration) -> Self {
        self.due = Due::After(delay);
        self
    }

    /// Attempts before the job is `failed`, `1..=1000`. Default: the job type's (3).
    pub fn max_attempts(mut self, max_attempts: i32) -> Self {
        self.max_attempts = Some(max_attempts);
        self
    }

    /// At most one live (scheduled, pending, claimed or running) job per key:
    /// a second enqueue with the key inserts nothing and reports the holder
    /// ([`crate::EnqueueOutcome::Duplicate`]). Finished jobs do not hold
    /// their key.
    pub fn unique_key(mut self, key: impl Into<String>) -> Self {
        self.unique_key = Some(key.into());
        self
    }

    /// Largest serialized payload accepted, in bytes. Default: the job type's (1 MiB).
    pub fn max_payload_bytes(mut self, limit: usize) -> Self {
        self.max_payload_bytes = Some(limit);
        self
    }
}
