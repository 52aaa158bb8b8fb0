//! One handler on its own: run with a payload and the application's
//! state, without a runner, and most often without a database.

use jobqueue_core::{Job, JobOptions, JobRow, NewJob};
use jobqueue_runner::Registry;
use jobqueue_runner::inline::Inline;

/// `job`'s handler from `registry`, to run once on its own: its payload as
/// it would be stored (serialized, then decoded by the registry's handler),
/// a [`JobContext`](jobqueue_runner::JobContext) reaching the registry's
/// application state, its first attempt of its type's allowed ones. No
/// runner, no database and no stored row: the handler's
/// [`ctx.conn()`](jobqueue_runner::JobContext::conn) fails (a retry saying
/// why) unless [`Inline::conn`] gives it one.
///
/// What it returns is the runner's own inline attempt, to set up
/// ([`attempt`](Inline::attempt), [`cancel_requested`](Inline::cancel_requested),
/// [`shutting_down`](Inline::shutting_down), [`config`](Inline::config),
/// [`conn`](Inline::conn), and for a workflow step the results of the
/// steps it comes after: [`parent_result`](Inline::parent_result),
/// [`parent_without_result`](Inline::parent_without_result)) and
/// [`run`](Inline::run): the [`Attempt`](crate::Attempt) says what the
/// handler came to, the result it recorded included.
///
/// Panics if `job` does not make a valid job (its type's name, its
/// payload's size) or an enqueue hook refuses it, as enqueueing it would
/// fail.
///
/// ```
/// use jobqueue_core::Job;
/// use jobqueue_runner::inline::Outcome;
/// use jobqueue_runner::{JobContext, JobError, Perform, Registry};
/// use serde::{Deserialize, Serialize};
///
/// #[derive(Serialize, Deserialize, Job)]
/// #[job(type = "email.send")]
/// struct SendEmail { to: String }
///
/// impl Perform for SendEmail {
///     fn perform(&self, ctx: &mut JobContext<'_>) -> Result<(), JobError> {
///         if !self.to.contains('@') {
///             return Err(JobError::fail("not an address"));
///         }
///         ctx.progress(100, "sent")
///     }
/// }
///
/// let registry = Registry::new().register::<SendEmail>();
/// let done = jobqueue_testing::perform(&registry, &SendEmail { to: "nobody".into() })
///     .run()
///     .expect("no database, nothing to fail");
/// assert_eq!(done.outcome, Outcome::Failed { error: "not an address".into() });
/// ```
#[track_caller]
pub fn perform<'a, T: Job>(registry: &'a Registry, job: &T) -> Inline<'a> {
    // As an enqueue would store it: after the process's enqueue hooks.
    let row = NewJob::from_job(job, JobOptions::new())
        .and_then(jobqueue_core::engine::hooked)
        .and_then(|job| JobRow::unstored(&job, 1, chrono::Utc::now()));
    match row {
        Ok(row) => Inline::unstored(registry, row),
        Err(e) => panic!("`{}` does not make a valid job: {e}", T::JOB_TYPE),
    }
}
