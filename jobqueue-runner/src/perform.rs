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
