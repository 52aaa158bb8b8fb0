//! A job ready to be inserted: validated type, payload and options; and
//! the options it is built with (`JobOptions`), which every field of it
//! can be given by.

use std::time::Duration;

use chrono::{DateTime, Utc};

use crate::limits::{
    self, DEFAULT_MAX_ATTEMPTS, DEFAULT_MAX_PAYLOAD_BYTES, DEFAULT_PRIORITY, DEFAULT_QUEUE,
    check_metadata, check_storable, check_tags,
};
use crate::{Error, Job, JobId, Result};

/// Seconds beyond which a delay is refused (about 100 years).
const MAX_DELAY_SECS: f64 = 100.0 * 365.25 * 24.0 * 3600.0;

/// A validated job, ready for [`crate::enqueue`] or [`crate::enqueue_many`].
///
/// Building one checks every field; a `NewJob` that exists is one the
/// database will accept.
#[derive(Debug, Clone, PartialEq)]
pub struct NewJob {
    pub(crate) id: JobId,
    pub(crate) job_type: String,
    pub(crate) payload: String,
    pub(crate) priority: i32,
    pub(crate) queue: String,
    pub(crate) max_attempts: i32,
    pub(crate) run_at: Option<DateTime<Utc>>,
    pub(crate) delay_secs: f64,
    pub(crate) unique_key: Option<String>,
    pub(crate) concurrency_key: Option<String>,
    /// Its tags (none: an empty list, stored as NULL).
    pub(crate) tags: Vec<String>,
    /// Its metadata as JSON object text, if any is set.
    pub(crate) metadata: Option<String>,
    /// The largest payload it may have, in bytes (checked again when an
    /// enqueue hook replaces it).
    pub(crate) max_payload_bytes: usize,
}

impl NewJob {
    /// A job of type `job_type` with `payload_json` as its payload (JSON
    /// text), using the queue-wide defaults for anything `options` leaves unset.
    pub fn new(job_type: &str, payload_json: &str, options: JobOptions) -> Result<Self> {
        limits::check_job_type(job_type)?;
        check_json(payload_json)?;
        let defaults = Defaults {
            priority: DEFAULT_PRIORITY,
            queue: DEFAULT_QUEUE,
            max_attempts: DEFAULT_MAX_ATTEMPTS,
            max_payload_bytes: DEFAULT_MAX_PAYLOAD_BYTES,
        };
        Self::build(job_type, payload_json.to_owned(), options, &defaults)
    }

    /// The job `job`, using `J`'s defaults for anything `options` leaves
    /// unset (its concurrency key: [`Job::concurrency_key`]).
    pub fn from_job<J: Job>(job: &J, mut options: JobOptions) -> Result<Self> {
        limits::check_job_type(J::JOB_TYPE)?;
        if options.concurrency_key.is_none() {
            options.concurrency_key = job.concurrency_key();
        }
        let payload = serde_json::to_string(job).map_err(|source| Error::Serialize {
            job_type: J::JOB_TYPE.to_owned(),
            source,
        })?;
        Self::build(J::JOB_TYPE, payload, options, &Defaults::of::<J>())
    }

    /// A job of type `J` from its payload as JSON text (as a command line or
    /// an HTTP endpoint receives it), with `J`'s defaults for anything
    /// `options` leaves unset. The payload must be JSON
    /// ([`Error::InvalidOption`] naming `payload` otherwise) that decodes as
    /// `J` ([`Error::Deserialize`] otherwise, naming the type); it is stored
    /// as given.
    pub fn from_json<J: Job>(payload_json: &str, mut options: JobOptions) -> Result<Self> {
        limits::check_job_type(J::JOB_TYPE)?;
        check_json(payload_json)?;
        let job = serde_json::from_str::<J>(payload_json).map_err(|source| Error::Deserialize {
            job_type: J::JOB_TYPE.to_owned(),
            source,
        })?;
        if options.concurrency_key.is_none() {
            options.concurrency_key = job.concurrency_key();
        }
        Self::build(
            J::JOB_TYPE,
            payload_json.to_owned(),
            options,
            &Defaults::of::<J>(),
        )
    }

    fn build(
        job_type: &str,
        payload: String,
        options: JobOptions,
        defaults: &Defaults,
    ) -> Result<Self> {
        let limit = options
            .max_payload_bytes
            .unwrap_or(defaults.max_payload_bytes);
        check_payload(job_type, &payload, limit)?;
        let priority = options.priority.unwrap_or(defaults.priority);
        limits::check_priority(priority)?;
        let queue = options.queue.unwrap_or_else(|| defaults.queue.to_owned());
        limits::check_queue(&queue)?;
        let max_attempts = options.max_attempts.unwrap_or(defaults.max_attempts);
        limits::check_max_attempts(max_attempts)?;
        if let Some(key) = &options.unique_key {
            limits::check_unique_key(key)?;
        }
        if let Some(key) = &options.concurrency_key {
            limits::check_concurrency_key(key)?;
        }
        check_tags(&options.tags)?;
        let metadata = metadata_text(&options.metadata)?;
        let (run_at, delay_secs) = match options.due {
            Due::Now => (None, 0.0),
            Due::At(at) => (Some(at), 0.0),
            Due::After(delay) => {
                let secs = delay.as_secs_f64();
                if secs > MAX_DELAY_SECS {
                    return Err(Error::invalid(
                        "delay",
                        format!("{delay:?} is longer than 100 years"),
                    ));
                }
                (None, secs)
            }
        };
        Ok(NewJob {
            id: JobId::new(),
            job_type: job_type.to_owned(),
            payload,
            priority,
            queue,
            max_attempts,
            run_at,
            delay_secs,
            unique_key: options.unique_key,
            concurrency_key: options.concurrency_key,
            tags: options.tags,
            metadata,
            max_payload_bytes: limit,
        })
    }

    /// The id the job will have once inserted.
    pub fn id(&self) -> JobId {
        self.id
    }

    /// The job type.
    pub fn job_type(&self) -> &str {
        &self.job_type
    }

    /// The queue.
    pub fn queue(&self) -> &str {
        &self.queue
    }

    /// Its tags, in the order they were added.
    pub fn tags(&self) -> &[String] {
        &self.tags
    }

    /// Its metadata, as JSON object text (`None`: none set).
    pub fn metadata(&self) -> Option<&str> {
        self.metadata.as_deref()
    }

    /// The payload, as JSON text.
    pub fn payload_json(&self) -> &str {
        &self.payload
    }

    /// Replaces the payload (an enqueue hook's: a field encrypted, say),
    /// checked as at build: JSON, storable, within the job's payload limit.
    /// The payload is not decoded as the job's type here: the handler's
    /// middleware that undoes the change decodes what it makes.
    pub fn set_payload_json(&mut self, payload_json: String) -> Result<()> {
        check_json(&payload_json)?;
        check_payload(&self.job_type, &payload_json, self.max_payload_bytes)?;
        self.payload = payload_json;
        Ok(())
    }

    /// Adds a tag, checked as [`JobOptions::tag`]'s (once: a tag it has is
    /// kept as it is).
    pub fn add_tag(&mut self, tag: impl Into<String>) -> Result<()> {
        let tag = tag.into();
        if self.tags.contains(&tag) {
            return Ok(());
        }
        let mut tags = self.tags.clone();
        tags.push(tag);
        check_tags(&tags)?;
        self.tags = tags;
        Ok(())
    }

    /// Sets `key` of its metadata, checked as [`JobOptions::meta`]'s.
    pub fn set_meta(
        &mut self,
        key: impl Into<String>,
        value: impl Into<serde_json::Value>,
    ) -> Result<()> {
        let mut map = match &self.metadata {
            // Text this type made from a map parses back into one.
            Some(text) => serde_json::from_str(text)
                .map_err(|e| Error::invalid("metadata", format!("not a JSON object: {e}")))?,
            None => serde_json::Map::new(),
        };
        map.insert(key.into(), value.into());
        self.metadata = metadata_text(&map)?;
        Ok(())
    }

    /// Moves it to `queue`, checked as [`JobOptions::queue`]'s.
    pub fn set_queue(&mut self, queue: impl Into<String>) -> Result<()> {
        let queue = queue.into();
        limits::check_queue(&queue)?;
        self.queue = queue;
        Ok(())
    }

    /// Sets its priority, checked as [`JobOptions::priority`]'s.
    pub fn set_priority(&mut self, priority: i32) -> Result<()> {
        limits::check_priority(priority)?;
        self.priority = priority;
        Ok(())
    }

    /// Its tags as a PostgreSQL array literal (`{"a","b"}`), for the
    /// statements that take each job's tags as one text, or `None` when it
    /// has none. Every element is quoted (a tag `NULL` stays a tag); tags
    /// hold no quote, backslash, comma or brace ([`check_tags`]).
    pub(crate) fn tags_literal(&self) -> Option<String> {
        if self.tags.is_empty() {
            return None;
        }
        let quoted: Vec<String> = self.tags.iter().map(|tag| format!("\"{tag}\"")).collect();
        Some(format!("{{{}}}", quoted.join(",")))
    }
}

/// The metadata of `map` as JSON text, checked (`None` when empty: stored
/// as NULL).
fn metadata_text(map: &serde_json::Map<String, serde_json::Value>) -> Result<Option<String>> {
    if map.is_empty() {
        return Ok(None);
    }
    // A map of JSON values always serializes.
    let text = serde_json::to_string(map)
        .map_err(|e| Error::invalid("metadata", format!("not serializable as JSON: {e}")))?;
    check_metadata(&text)?;
    Ok(Some(text))
}

/// Refuses a payload over `limit` bytes, and JSON `jsonb` would not store.
fn check_payload(job_type: &str, payload: &str, limit: usize) -> Result<()> {
    if payload.len() > limit {
        return Err(Error::PayloadTooLarge {
            job_type: job_type.to_owned(),
            size: payload.len(),
            limit,
        });
    }
    check_storable("payload", payload)
}

/// Refuses text that is not JSON at all, before any type is tried on it.
fn check_json(payload_json: &str) -> Result<()> {
    match serde_json::from_str::<serde::de::IgnoredAny>(payload_json) {
        Ok(_) => Ok(()),
        Err(e) => Err(Error::invalid("payload", format!("not valid JSON: {e}"))),
    }
}

struct Defaults {
    priority: i32,
    queue: &'static str,
    max_attempts: i32,
    max_payload_bytes: usize,
}

impl Defaults {
    fn of<J: Job>() -> Self {
        Defaults {
            priority: J::PRIORITY,
            queue: J::QUEUE,
            max_attempts: J::MAX_ATTEMPTS,
            max_payload_bytes: J::MAX_PAYLOAD_BYTES,
        }
    }
}

// Per-enqueue options: priority, queue, when due, attempts, unique key,
// concurrency key, tags and metadata.

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
