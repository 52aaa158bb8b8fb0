//! The `Job` trait: what a payload type declares to become a job.

use diesel::PgConnection;
use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::limits::{
    DEFAULT_MAX_ATTEMPTS, DEFAULT_MAX_PAYLOAD_BYTES, DEFAULT_PRIORITY, DEFAULT_QUEUE,
};
use crate::{EnqueueOutcome, Enqueued, JobOptions, NewJob, Result, RetryPolicy};

/// A payload type that can be stored and worked as a job.
///
/// Only [`Job::JOB_TYPE`] is required: a stable name stored with every job,
/// so renaming the Rust type never orphans stored jobs.
///
/// ```
/// use jobqueue_core::Job;
/// use serde::{Deserialize, Serialize};
///
/// #[derive(Serialize, Deserialize)]
/// struct SendEmail {
///     to: String,
/// }
///
/// impl Job for SendEmail {
///     const JOB_TYPE: &'static str = "email.send";
///     const QUEUE: &'static str = "mail";
///     const MAX_ATTEMPTS: i32 = 5;
/// }
///
/// # fn run(conn: &mut diesel::PgConnection) -> jobqueue_core::Result<()> {
/// // Inside the application's own transaction: the job exists iff it commits.
/// let id = SendEmail { to: "a@example.com".into() }.enqueue(conn)?.id();
/// // With options:
/// let later = SendEmail { to: "b@example.com".into() }
///     .options()
///     .priority(200)
///     .delay(std::time::Duration::from_secs(60))
///     .enqueue(conn)?
///     .id();
/// # let _ = (id, later);
/// # Ok(())
/// # }
/// ```
pub trait Job: Serialize + DeserializeOwned {
    /// Stable type name, 1 to 128 characters of `[A-Za-z0-9_.:-]`, e.g. `email.send`.
    const JOB_TYPE: &'static str;
    /// Default priority, `0..=1000`, higher first. Default 100.
    const PRIORITY: i32 = DEFAULT_PRIORITY;
    /// Default queue. Default `default`.
    const QUEUE: &'static str = DEFAULT_QUEUE;
    /// Default attempts before `failed`. Default 3.
    const MAX_ATTEMPTS: i32 = DEFAULT_MAX_ATTEMPTS;
    /// Largest serialized payload accepted, in bytes. Default 1 MiB.
    const MAX_PAYLOAD_BYTES: usize = DEFAULT_MAX_PAYLOAD_BYTES;
    /// The backoff between this type's attempts, overriding the runner's
    /// (`#[job(backoff_base_ms = N, backoff_max_secs = N)]`). Default: the
    /// runner's policy.
    const RETRY_POLICY: Option<RetryPolicy> = None;

    /// This job's concurrency key (e.g. `customer:42`) when it is enqueued
    /// without an explicit `.key(...)` option: a queue may limit how many
    /// jobs of one key run at once. `#[job(concurrency_key = "field")]` derives it as
    /// the field's value as text (`None` when the field is an `Option`
    /// holding `None`). At most 255 characters, checked when the job is
    /// built. Default: no key.
    fn concurrency_key(&self) -> Option<String> {
        None
    }

    /// Enqueues this job with its type's defaults, on `conn`: inside the
    /// caller's open transaction if there is one, so the job exists if and
    /// only if that transaction commits. See [`crate::enqueue`] for the
    /// outcome when a unique key is already held.
    fn enqueue(&self, conn: &mut PgConnection) -> Result<EnqueueOutcome>
    where
        Self: Sized,
    {
        crate::enqueue(conn, &NewJob::from_job(self, JobOptions::default())?)
    }

    /// Starts an enqueue with options: `job.options().priority(5).enqueue(conn)`.
    fn options(&self) -> EnqueueBuilder<'_, Self>
    where
        Self: Sized,
    {
        EnqueueBuilder {
            job: self,
            options: JobOptions::default(),
        }
    }

    /// Enqueues many jobs of this type, with its defaults, in one statement:
    /// [`crate::enqueue_many`] for one type, as [`Job::enqueue`] is
    /// [`crate::enqueue`] for one job.
    fn enqueue_many<'a, I>(conn: &mut PgConnection, jobs: I) -> Result<Enqueued>
    where
        Self: Sized + 'a,
        I: IntoIterator<Item = &'a Self>,
    {
        crate::enqueue_many(conn, &with_defaults(jobs)?)
    }

    /// [`Job::enqueue`] on diesel-async's `AsyncPgConnection` (feature
    /// `async`): the same outcome, awaited. Inside the caller's open
    /// transaction, if any, so the job exists if and only if it commits.
    /// The payload is serialized and checked before the future is made.
    #[cfg(feature = "async")]
    fn enqueue_async<'c>(
        &self,
        conn: &'c mut diesel_async::AsyncPgConnection,
    ) -> impl Future<Output = Result<EnqueueOutcome>> + Send + 'c
    where
        Self: Sized,
    {
        let job = NewJob::from_job(self, JobOptions::default());
        async move { crate::enqueue_async(conn, &job?).await }
    }

    /// [`Job::enqueue_many`] on diesel-async's `AsyncPgConnection` (feature
    /// `async`): one multi-row insert, see [`crate::enqueue_many_async`].
    #[cfg(feature = "async")]
    fn enqueue_many_async<'a, 'c, I>(
        conn: &'c mut diesel_async::AsyncPgConnection,
        jobs: I,
    ) -> impl Future<Output = Result<Enqueued>> + Send + 'c
    where
        Self: Sized + 'a,
        I: IntoIterator<Item = &'a Self>,
    {
        let jobs = with_defaults(jobs);
        async move { crate::enqueue_many_async(conn, &jobs?).await }
    }
}

/// The jobs `jobs`, each with its type's defaults.
fn with_defaults<'a, J: Job + 'a>(jobs: impl IntoIterator<Item = &'a J>) -> Result<Vec<NewJob>> {
    jobs.into_iter()
        .map(|job| NewJob::from_job(job, JobOptions::default()))
        .collect()
}

/// An enqueue in the making: a job plus options. Made by [`Job::options`].
#[derive(Debug)]
#[must_use = "nothing is enqueued until `.enqueue(conn)` is called"]
pub struct EnqueueBuilder<'a, J> {
    job: &'a J,
    options: JobOptions,
}

/// Setters of [`EnqueueBuilder`], each setting [`JobOptions`]' option of
/// the same name.
macro_rules! option_setters {
    ($($name:ident($arg:ident: $ty:ty);)*) => {
        $(
            #[doc = concat!("See [`JobOptions::", stringify!($name), "`].")]
            pub fn $name(mut self, $arg: $ty) -> Self {
                self.options = self.options.$name($arg);
                self
            }
        )*
    };
}

impl<J: Job> EnqueueBuilder<'_, J> {
    option_setters! {
        priority(priority: i32);
        queue(queue: impl Into<String>);
        run_at(at: chrono::DateTime<chrono::Utc>);
        delay(delay: std::time::Duration);
        max_attempts(max_attempts: i32);
        unique_key(key: impl Into<String>);
        concurrency_key(key: impl Into<String>);
        max_payload_bytes(limit: usize);
        tag(tag: impl Into<String>);
    }

    /// See [`JobOptions::meta`].
    pub fn meta(mut self, key: impl Into<String>, value: impl Into<serde_json::Value>) -> Self {
        self.options = self.options.meta(key, value);
        self
    }

    /// The validated job, for [`crate::enqueue_many`].
    pub fn build(self) -> Result<NewJob> {
        NewJob::from_job(self.job, self.options)
    }

    /// Enqueues the job on `conn` (joining its open transaction, if any):
    /// inserted, or a [`Duplicate`](crate::Duplicate) when a live job holds
    /// its unique key.
    pub fn enqueue(self, conn: &mut PgConnection) -> Result<EnqueueOutcome> {
        crate::enqueue(conn, &self.build()?)
    }

    /// [`EnqueueBuilder::enqueue`] on diesel-async's `AsyncPgConnection`
    /// (feature `async`): the same outcome, awaited.
    #[cfg(feature = "async")]
    pub fn enqueue_async(
        self,
        conn: &mut diesel_async::AsyncPgConnection,
    ) -> impl Future<Output = Result<EnqueueOutcome>> + Send + '_ {
        let job = self.build();
        async move { crate::enqueue_async(conn, &job?).await }
    }
}
