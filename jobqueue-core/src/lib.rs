//! PostgreSQL-backed background jobs: the schema, enqueue, claim, and
//! everything a worker writes on the jobs it holds.
//!
//! Jobs are rows of `jobqueue_jobs`. An application enqueues them on its own
//! connection, inside its own transaction ([`Job::enqueue`], [`enqueue_many`]):
//! a job exists if and only if that transaction commits. Workers [`claim`]
//! due jobs with one `FOR UPDATE SKIP LOCKED` statement and then hold a
//! [`Lease`] on each: [`complete_many`], [`fail_many`], [`heartbeat_many`]
//! and [`report_progress`] apply only while the lease's fencing token still
//! matches, so a worker that lost its job can change nothing.
//! [`rescue_stale`] recovers jobs whose lease expired, [`prune`] deletes old
//! finished jobs, [`queue_stats`] counts what is where.
//!
//! All time comparisons use the database's clock. The queue's own statements
//! run at READ COMMITTED whatever the database default is.
//!
//! ```no_run
//! use diesel::prelude::*;
//! use jobqueue_core::{Claim, Job, RetryPolicy, Failure};
//! use serde::{Deserialize, Serialize};
//!
//! #[derive(Serialize, Deserialize)]
//! struct Resize { image: String }
//! impl Job for Resize { const JOB_TYPE: &'static str = "image.resize"; }
//!
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let mut conn = PgConnection::establish("postgres://postgres@127.0.0.1/app")?;
//! jobqueue_core::run_migrations(&mut conn)?;
//! Resize { image: "cat.png".into() }.enqueue(&mut conn)?;
//!
//! for job in jobqueue_core::claim(&mut conn, &Claim::new("worker-1").limit(50))? {
//!     let payload: Resize = job.payload_as()?;
//!     match std::fs::metadata(&payload.image) {
//!         Ok(_) => jobqueue_core::complete(&mut conn, &job.lease())?,
//!         Err(e) => {
//!             let failure = Failure::retry(job.lease(), e.to_string(), &RetryPolicy::default());
//!             jobqueue_core::fail(&mut conn, &failure)?;
//!         }
//!     }
//! }
//! # Ok(())
//! # }
//! ```

// Lets `#[derive(Job)]`'s `::jobqueue_core::...` paths resolve inside this crate too.
extern crate self as jobqueue_core;

mod admin;
mod browse;
mod cancel;
mod claim;
mod cron_schedule;
mod doctor;
mod enqueue;
mod error;
mod finish;
mod heartbeat;
mod human;
mod id;
mod id_rows;
mod isolation;
mod job;
mod lease;
pub mod limits;
mod migrate;
mod new_job;
mod options;
mod periodic;
mod plan;
mod prepared;
mod prune;
mod queue_head;
mod queues;
mod ready;
mod redact;
mod rescue;
mod retry_policy;
mod row;
mod runners;
pub mod schema;
mod session;
mod snooze;
mod sql;
mod stats;
mod status;

pub use admin::{JobFilter, list_jobs, retry_failed, retry_job};
pub use browse::{
    BoundedCount, JobCursor, JobOrder, JobPage, JobQuery, MinuteCount, SEARCH_WINDOW,
    THROUGHPUT_MOST, browse_jobs, count_jobs, delete_finished_job, retry_failed_matching,
    throughput,
};
pub use cancel::{CancelOutcome, cancel};
pub use claim::{Claim, DEFAULT_LEASE, GlobalLimits, Resume, claim};
pub use cron_schedule::CronSchedule;
pub use doctor::{Check, CheckStatus, DoctorOptions, doctor};
pub use enqueue::{Duplicate, EnqueueOutcome, Enqueued, NOTIFY_DEBOUNCE, enqueue, enqueue_many};
pub use error::{Error, Result};
pub use finish::{
    FailOutcome, FailedMany, Failure, cancel_held_many, complete, complete_and_delete,
    complete_and_delete_many, complete_many, fail, fail_many, park_many, release_many, start_many,
};
pub use heartbeat::{Heartbeat, Progress, heartbeat_many, report_progress};
pub use human::human_duration;
pub use id::JobId;
pub use job::{EnqueueBuilder, Job};
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
pub use lease::{Fenced, Lease};
pub use migrate::{MIGRATIONS, run_migrations};
pub use new_job::NewJob;
pub use options::{JobOptions, Schedule};
pub use periodic::{
    FirePass, Missed, ORPHANED_AFTER, Periodic, ScheduleInfo, declare_schedules, fire_due,
    list_schedules, run_schedule_now, set_schedule_paused,
};
pub use plan::{HotStatement, Plan, TableRead};
pub use prune::{COUNTS_KEPT, Pruned, Retention, prune};
pub use queue_head::{QueueHead, queue_head};
pub use queues::{QueueChange, QueueInfo, list_queues, pause_queue, resume_queue, set_queue_limit};
pub use ready::{DEFAULT_PROMOTE_BATCH, promote_due, reclaim_unhandled};
pub use redact::redact_url;
pub use rescue::{DEFAULT_RESCUE_BATCH, Rescued, rescue_stale};
pub use retry_policy::RetryPolicy;
pub use row::{JobRow, get_job};
pub use runners::{
    RunnerInfo, RunnerRow, deregister_runner, list_runners, register_runner, runner_seen,
    try_lead_queue_gauges,
};
pub use session::{QueueSession, Vacuumed};
pub use snooze::{DEFAULT_MAX_SNOOZES, Snooze, Snoozed, snooze_many};
pub use stats::{Counting, QueueStats, TypeStats, completed_within, queue_stats, type_stats};
pub use status::JobStatus;

/// What `#[derive(Job)]`'s generated code names; not a public API.
#[doc(hidden)]
pub mod __private {
    pub use serde;
}

/// This crate's version (`major.minor.patch`), for tools that report what
/// they ran.
pub const VERSION: &str = env!("CARGO_PKG_VERSION");

/// The `LISTEN`/`NOTIFY` channel on which enqueues announce available jobs.
pub const NOTIFY_CHANNEL: &str = "jobqueue_jobs";
