//! Per-enqueue options: priority, queue, when due, attempts, unique key,
//! concurrency key, tags and metadata.

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

/// Chaining setters of [`JobOptions`], each `name(arg: Type) => field =
/// value;`: sets the field, returns the options.
macro_rules! setters {
    ($($(#[$doc:meta])* $name:ident($arg:ident: $ty:ty) => $field:ident = $value:expr;)*) => {
        $(
            $(#[$doc])*
            pub fn $name(mut self, $arg: $ty) -> Self {
                self.$field = $value;
                self
            }
        )*
    };
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
    pub(crate) concurrency_key: Option<String>,
    pub(crate) max_payload_bytes: Option<usize>,
    pub(crate) tags: Vec<String>,
    pub(crate) metadata: serde_json::Map<String, serde_json::Value>,
}

impl JobOptions {
    /// Options with every field unset.
    pub fn new() -> Self {
        Self::default()
    }

    setters! {
        /// Priority, `0..=1000`; higher runs first. Default: the job type's (100).
        priority(priority: i32) => priority = Some(priority);

        /// Named queue, 1 to 64 characters of `[A-Za-z0-9_.:-]`. Default: the job
        /// type's (`default`).
        queue(queue: impl Into<String>) => queue = Some(queue.into());

        /// Not before this instant. Replaces an earlier `delay`.
        run_at(at: DateTime<Utc>) => due = Due::At(at);

        /// Not before this long after the database's `now()`. Replaces an earlier `run_at`.
        delay(delay: Duration) => due = Due::After(delay);

        /// Attempts before the job is `failed`, `1..=1000`. Default: the job type's (3).
        max_attempts(max_attempts: i32) => max_attempts = Some(max_attempts);

        /// At most one live (scheduled, pending, claimed or running) job per key:
        /// a second enqueue with the key inserts nothing and reports the holder
        /// ([`crate::EnqueueOutcome::Duplicate`]). Finished jobs do not hold
        /// their key.
        unique_key(key: impl Into<String>) => unique_key = Some(key.into());

        /// Concurrency key, 1 to 255 characters (`customer:42`): in a queue
        /// with a key limit ([`crate::set_queue_key_limit`]), at most that
        /// many of the key's jobs run at once, fleet-wide, and in an ordered
        /// queue the key's jobs run one at a time in enqueue order. Without
        /// a key limit on the queue, the key changes nothing. Default: the
        /// job's own ([`crate::Job::concurrency_key`], e.g. from
        /// `#[job(concurrency_key = "field")]`), else none.
        concurrency_key(key: impl Into<String>) => concurrency_key = Some(key.into());

        /// Largest serialized payload accepted, in bytes. Default: the job type's (1 MiB).
        max_payload_bytes(limit: usize) => max_payload_bytes = Some(limit);
    }

    /// Adds a tag (`tenant:42`, `import`): lists, the dashboard and the
    /// browse API select jobs by tag ([`crate::browse::JobQuery::tag`]).
    /// At most [`crate::limits::MAX_TAGS`] per job, each 1 to 64
    /// characters of `[A-Za-z0-9_.:=/-]`; a tag given twice is kept once.
    pub fn tag(mut self, tag: impl Into<String>) -> Self {
        let tag = tag.into();
        if !self.tags.contains(&tag) {
            self.tags.push(tag);
        }
        self
    }

    /// Adds each of `tags` (see [`JobOptions::tag`]).
    pub fn tags<T: Into<String>>(self, tags: impl IntoIterator<Item = T>) -> Self {
        tags.into_iter().fold(self, |options, tag| options.tag(tag))
    }

    /// Sets `key` of the job's metadata, a JSON object stored beside the
    /// payload (who enqueued it, from where) that handlers and middleware
    /// read ([`crate::JobRow::metadata`]); replaces an earlier value of the
    /// key. At most [`crate::limits::MAX_METADATA_BYTES`] of JSON in all.
    pub fn meta(mut self, key: impl Into<String>, value: impl Into<serde_json::Value>) -> Self {
        self.metadata.insert(key.into(), value.into());
        self
    }
}
