//! PostgreSQL-backed background jobs: the schema, enqueue, and the calls
//! that look at and steer the queue.
//!
//! Jobs are rows of `jobqueue_jobs`. An application enqueues them on its own
//! connection, inside its own transaction ([`Job::enqueue`], [`enqueue_many`]):
//! a job exists if and only if that transaction commits. A runner (the
//! `jobqueue-runner` crate) claims and works them.
//!
//! The top level holds what an application uses: the [`Job`](trait@Job)
//! trait and its derive, enqueue with [`JobOptions`], [`Error`],
//! [`run_migrations`], and the admin calls ([`get_job`], [`cancel`],
//! [`retry_job`], [`list_queues`], [`pause_queue`], [`list_schedules`],
//! [`doctor`], ...). [`browse`] holds the job lists, page by page (what a
//! dashboard shows); [`engine`] the building blocks a runner is made of
//! (claim, leases, finishing, maintenance passes).
//!
//! All time comparisons use the database's clock. The queue's own statements
//! run at READ COMMITTED whatever the database default is.
//!
//! ```no_run
//! use diesel::prelude::*;
//! use jobqueue_core::{Job, JobStatus};
//! use serde::{Deserialize, Serialize};
//!
//! #[derive(Serialize, Deserialize, Job)]
//! #[job(type = "image.resize", queue = "images")]
//! struct Resize { image: String }
//!
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let mut conn = PgConnection::establish("postgres://postgres@127.0.0.1/app")?;
//! jobqueue_core::run_migrations(&mut conn)?;
//! let id = conn.transaction::<_, jobqueue_core::Error, _>(|conn| {
//!     // ... the application's own writes ...
//!     Resize { image: "cat.png".into() }.enqueue(conn).map(|outcome| outcome.id())
//! })?;
//! match jobqueue_core::get_job(&mut conn, id)? {
//!     jobqueue_core::JobLookup::Found(job) => assert_eq!(job.status, JobStatus::Pending),
//!     // Why there is none: the job finished and its row is gone, or the
//!     // id is not one jobqueue issued.
//!     jobqueue_core::JobLookup::NotFound(missing) => println!("{missing}"),
//! }
//! # Ok(())
//! # }
//! ```

// Lets `#[derive(Job)]`'s `::jobqueue_core::...` paths resolve inside this crate too.
extern crate self as jobqueue_core;

mod admin;
mod admission;
mod batch;
pub mod browse;
mod cancel;
mod claim;
mod connection;
mod cron_schedule;
mod database_url;
mod doctor;
mod durable_step;
pub mod engine;
mod enqueue;
#[cfg(feature = "async")]
mod enqueue_async;
mod enqueue_hooks;
mod enqueue_keys;
mod error;
mod finish;
mod global_limit;
mod heartbeat;
mod horizon;
pub mod human;
mod id;
mod id_rows;
mod index_rebuild;
mod isolation;
mod job;
mod job_result;
#[cfg(feature = "async")]
mod job_result_async;
mod key_limit;
mod lease;
pub mod limits;
mod lookup;
mod migrate;
mod new_job;
mod periodic;
mod plan;
mod prepared;
mod prune;
mod queue_config;
mod queue_head;
mod queue_key;
mod queues;
mod rate_limit;
mod ready;
mod redact;
mod rescue;
mod retry_policy;
mod row;
mod runners;
pub mod schema;
mod session;
mod set_aside;
mod snooze;
mod sql;
mod stats;
mod status;
mod trace_context;
mod vacuum;
mod workflow;
mod workflow_release;
mod workflow_show;

pub use admin::{retry_failed, retry_job};
pub use batch::{Batch, ON_FINISH, ON_SUCCESS};
pub use cancel::{CancelOutcome, cancel};
pub use cron_schedule::CronSchedule;
pub use doctor::{Check, CheckStatus, DoctorOptions, doctor};
pub use enqueue::{Duplicate, EnqueueOutcome, Enqueued, enqueue, enqueue_many};
#[cfg(feature = "async")]
pub use enqueue_async::{enqueue_async, enqueue_many_async};
pub use enqueue_hooks::{EnqueueHook, add_enqueue_hook};
pub use error::{Error, Result};
pub use global_limit::GlobalLimit;
pub use id::JobId;
pub use job::{EnqueueBuilder, Job};
pub use job_result::{JobResult, RECHECK, RESULTS_CHANNEL, kept_result, result, wait_result};
#[cfg(feature = "async")]
pub use job_result_async::{result_async, wait_result_async};
/// `#[derive(Job)]`: implements [`Job`](trait@Job) from a `#[job(...)]`
/// attribute, checking its values at compile time.
///
/// `use jobqueue_core::Job;` brings both the trait and the derive.
///
/// ```
/// use jobqueue_core::Job;
/// use serde::{Deserialize, Serialize};
///
/// #[derive(Serialize, Deserialize, Job)]
/// #[job(type = "email.send", priority = 150, queue = "mail", max_attempts = 5)]
/// struct SendEmail {
///     to: String,
/// }
///
/// // Keys left out keep the trait's defaults.
/// #[derive(Serialize, Deserialize, Job)]
/// #[job(type = "report.build")]
/// enum Report {
///     Daily,
///     Monthly { month: u32 },
/// }
///
/// assert_eq!(SendEmail::JOB_TYPE, "email.send");
/// assert_eq!(SendEmail::PRIORITY, 150);
/// assert_eq!(<Report as Job>::QUEUE, "default");
/// assert_eq!(<Report as Job>::MAX_ATTEMPTS, 3);
///
/// # fn run(conn: &mut diesel::PgConnection) -> jobqueue_core::Result<()> {
/// SendEmail { to: "a@example.com".into() }.enqueue(conn)?;
/// Report::Monthly { month: 11 }.options().queue("reports").enqueue(conn)?;
/// # Ok(())
/// # }
/// ```
///
/// A crate that re-exports `jobqueue_core` under another path names it with
/// `#[job(type = "...", crate = "my_app::jobqueue")]`.
#[cfg(feature = "derive")]
pub use jobqueue_derive::Job;
pub use key_limit::{KeyLimit, set_queue_key_limit};
pub use lookup::{ID_CLOCK_TOLERANCE, JobLookup, Missing, MissingJob, get_job};
pub use migrate::{MIGRATIONS, SchemaVersions, pending_migrations, run_migrations};
pub use new_job::JobOptions;
pub use new_job::NewJob;
pub use periodic::{
    Missed, Periodic, ScheduleInfo, list_schedules, run_schedule_now, set_schedule_paused,
};
pub use prune::Retention;
pub use queue_config::{Declared, QueueConfig, declare_queue, declare_queues};
pub use queues::{
    Counting, Override, QueueChange, QueueInfo, list_queues, pause_queue, resume_queue,
    set_queue_limit,
};
pub use rate_limit::{
    MAX_RATE_PERIOD, MAX_RATE_STARTS, MIN_RATE_MARGIN, MIN_RATE_PERIOD, RateLimit,
    set_queue_rate_limit,
};
pub use redact::redact_url;
pub use retry_policy::RetryPolicy;
pub use row::JobRow;
pub use runners::{RunnerRow, list_runners};
pub use stats::{TypeStats, type_stats};
pub use status::JobStatus;
pub use workflow::{
    EnqueuedWorkflow, MAX_WORKFLOW_NAME, MAX_WORKFLOW_STEPS, OnFailure, Step, Workflow,
};
pub use workflow_show::{
    StepInfo, WorkflowInfo, WorkflowLookup, WorkflowSummary, get_workflow, list_workflows,
};

/// What `#[derive(Job)]`'s generated code names; not a public API.
#[doc(hidden)]
pub mod __private {
    pub use serde;
}

/// This crate's version (`major.minor.patch`), for tools that report what
/// they ran.
pub const VERSION: &str = env!("CARGO_PKG_VERSION");
