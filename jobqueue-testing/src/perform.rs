//! One handler on its own: run with a payload and the application's
//! state, without a runner, and most often without a database.

use diesel::PgConnection;
use jobqueue_core::{Job, JobOptions, JobRow, NewJob, Result};
use jobqueue_runner::inline::{Attempt, Inline};
use jobqueue_runner::{Registry, RunnerConfig};

/// One attempt of a job's handler, to be run on its own: made by
/// [`perform`], set up by its options, then [`run`](Performing::run).
#[must_use = "nothing runs until `.run()` is called"]
pub struct Performing<'a> {
    registry: &'a Registry,
    job: Result<NewJob>,
    attempt: i32,
    conn: Option<&'a mut PgConnection>,
    config: Option<&'a RunnerConfig>,
    cancel_requested: bool,
    shutting_down: bool,
}

impl std::fmt::Debug for Performing<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Performing")
            .field("job", &self.job)
            .field("attempt", &self.attempt)
            .field("has_conn", &self.conn.is_some())
            .field("cancel_requested", &self.cancel_requested)
            .field("shutting_down", &self.shutting_down)
            .finish()
    }
}

/// `job`'s handler from `registry`, to run once on its own: its payload as
/// it would be stored (serialized, then decoded by the registry's handler),
/// a [`JobContext`](jobqueue_runner::JobContext) reaching the registry's
/// application state, its first attempt of its type's allowed ones. No
/// runner, no database and no stored row: the handler's
/// [`ctx.conn()`](jobqueue_runner::JobContext::conn) fails (a retry saying
/// why) unless [`conn`](Performing::conn) gives it one.
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
///             return Err(JobError::permanent("not an address"));
///         }
///         ctx.progress(100, "sent")
///     }
/// }
///
/// let registry = Registry::new().register::<SendEmail>();
/// let done = jobqueue_testing::perform(&registry, &SendEmail { to: "nobody".into() })
///     .run()
///     .expect("no database, nothing to fail");
/// assert_eq!(done.outcome, Outcome::Permanent { error: "not an address".into() });
/// ```
pub fn perform<'a, T: Job>(registry: &'a Registry, job: &T) -> Performing<'a> {
    Performing {
        registry,
        job: NewJob::from_job(job, JobOptions::new()),
        attempt: 1,
        conn: None,
        config: None,
        cancel_requested: false,
        shutting_down: false,
    }
}

impl<'a> Performing<'a> {
    /// Runs it as attempt number `attempt` (what
    /// [`JobContext::attempt`](jobqueue_runner::JobContext::attempt) says).
    pub fn attempt(mut self, attempt: i32) -> Self {
        self.attempt = attempt;
        self
    }

    /// Gives the handler `conn` for its own statements (inside a test
    /// transaction, a savepoint of it); its own completion
    /// ([`complete_in_transaction`](jobqueue_runner::JobContext::complete_in_transaction))
    /// runs its work there and completes no row, there being none.
    pub fn conn(mut self, conn: &'a mut PgConnection) -> Self {
        self.conn = Some(conn);
        self
    }

    /// Decides as a runner configured by `config` would (its retry policy
    /// for types that declare none).
    pub fn config(mut self, config: &'a RunnerConfig) -> Self {
        self.config = Some(config);
        self
    }

    /// The handler sees a cancel request.
    pub fn cancel_requested(mut self) -> Self {
        self.cancel_requested = true;
        self
    }

    /// The handler sees its runner shutting down.
    pub fn shutting_down(mut self) -> Self {
        self.shutting_down = true;
        self
    }

    /// Runs the handler once and says what came of it: its outcome (what a
    /// runner would write), its progress reports, whether it panicked.
    /// Errors: the job does not make a valid job (a payload too large...),
    /// or, with a connection, its savepoint could not be opened or closed.
    pub fn run(self) -> Result<Attempt> {
        let job = self.job?;
        let row = JobRow::unstored(&job, self.attempt, chrono::Utc::now())?;
        let mut inline = Inline::unstored(self.registry, &row);
        if let Some(conn) = self.conn {
            inline = inline.conn(conn);
        }
        if let Some(config) = self.config {
            inline = inline.config(config);
        }
        if self.cancel_requested {
            inline = inline.cancel_requested();
        }
        if self.shutting_down {
            inline = inline.shutting_down();
        }
        inline.run()
    }
}
