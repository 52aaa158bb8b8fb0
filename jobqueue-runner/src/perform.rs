//! The handler trait: how a job type is worked.

use std::time::Duration;

use jobqueue_core::Job;

use crate::{JobContext, JobError};

/// A job type the runner can work.
///
/// ```
/// use jobqueue_core::Job;
/// use jobqueue_runner::{JobContext, JobError, Perform};
/// use serde::{Deserialize, Serialize};
///
/// #[derive(Serialize, Deserialize)]
/// struct SendEmail { to: String }
///
/// impl Job for SendEmail {
///     const JOB_TYPE: &'static str = "email.send";
/// }
///
/// impl Perform for SendEmail {
///     fn perform(&self, ctx: &mut JobContext<'_>) -> Result<(), JobError> {
///         ctx.progress(50, "rendering")?;
///         if self.to.is_empty() {
///             return Err(JobError::fail("no recipient"));
///         }
///         Ok(())
///     }
/// }
/// ```
pub trait Perform: Job + Send + 'static {
    /// How long an attempt may run before it is flagged as timed out
    /// ([`JobContext::is_timed_out`]); after one more lease period the
    /// runner stops renewing its lease so another runner can recover it.
    /// Default: the runner's `default_timeout` (none unless configured).
    const TIMEOUT: Option<Duration> = None;

    /// Works one attempt of the job.
    fn perform(&self, ctx: &mut JobContext<'_>) -> Result<(), JobError>;
}

/// A job type whose handler is an `async fn`: it runs as a task on the
/// runner's tokio runtime and holds no worker thread while it awaits (the
/// `async` feature). Registered with [`Registry::register_async`].
///
/// An attempt has what a thread handler's has: the same [`JobContext`],
/// outcomes, retries, middleware and concurrency limits. Three things
/// differ, because a future can be dropped where a thread cannot be
/// stopped:
///
/// - past its timeout ([`AsyncPerform::TIMEOUT`], else the runner's
///   `default_timeout`) the future is dropped at its next await and the
///   attempt fails as retryable, naming the timeout;
/// - a cancel request drops it the same way (the job ends cancelled), and
///   so does a lost lease (nothing is written);
/// - a panic is caught as a thread handler's is.
///
/// The context's database calls ([`JobContext::conn`], progress, steps)
/// are blocking round trips on the task's runtime thread: keep them short,
/// or give the application's own `diesel-async` pool with
/// [`Registry::state`] for long queries.
///
/// ```
/// use std::time::Duration;
/// use jobqueue_core::Job;
/// use jobqueue_runner::{AsyncPerform, JobContext, JobError, Registry};
/// use serde::{Deserialize, Serialize};
///
/// #[derive(Serialize, Deserialize, Job)]
/// #[job(type = "webhook.deliver")]
/// struct Deliver { url: String }
///
/// impl AsyncPerform for Deliver {
///     const TIMEOUT: Option<Duration> = Some(Duration::from_secs(30));
///
///     async fn perform(&self, ctx: &mut JobContext<'_>) -> Result<(), JobError> {
///         // An async HTTP client's call would be awaited here.
///         tokio::time::sleep(Duration::from_millis(10)).await;
///         ctx.progress(100, "delivered")
///     }
/// }
///
/// let registry = Registry::new().register_async::<Deliver>();
/// ```
///
/// [`Registry::register_async`]: crate::Registry::register_async
/// [`Registry::state`]: crate::Registry::state
#[cfg(feature = "async")]
pub trait AsyncPerform: Job + Send + Sync + 'static {
    /// How long an attempt may run: its future is dropped past this.
    /// Default: the runner's `default_timeout` (none unless configured).
    const TIMEOUT: Option<Duration> = None;

    /// Works one attempt of the job.
    fn perform(
        &self,
        ctx: &mut JobContext<'_>,
    ) -> impl std::future::Future<Output = Result<(), JobError>> + Send;
}
