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

mod cancel;
mod claim;
mod enqueue;
mod error;
mod finish;
mod heartbeat;
mod id;
mod isolation;
mod job;
mod lease;
pub mod limits;
mod migrate;
mod new_job;
mod options;
mod prune;
mod rescue;
mod retry_policy;
mod row;
pub mod schema;
mod sql;
mod stats;
mod status;

pub use cancel::{CancelOutcome, cancel};
pub use claim::{Claim, DEFAULT_LEASE, claim, explain_claim};
pub use enqueue::{Enqueued, enqueue, enqueue_many};
pub use error::{Error, Result};
pub use finish::{
    FailOutcome, FailedMany, Failure, cancel_held_many, complete, complete_many, fail, fail_many,
    release_many, start_many,
};
pub use heartbeat::{Heartbeat, Progress, heartbeat_many, report_progress};
pub use id::JobId;
pub use job::{EnqueueBuilder, Job};
pub use lease::{Fenced, Lease};
pub use migrate::{MIGRATIONS, run_migrations};
pub use new_job::NewJob;
pub use options::{JobOptions, Schedule};
pub use prune::{Pruned, Retention, prune};
pub use rescue::{DEFAULT_RESCUE_BATCH, Rescued, rescue_stale};
pub use retry_policy::RetryPolicy;
pub use row::{JobRow, get_job};
pub use stats::{QueueStats, queue_stats};
pub use status::JobStatus;

/// The `LISTEN`/`NOTIFY` channel on which enqueues announce available jobs.
pub const NOTIFY_CHANNEL: &str = "jobqueue_jobs";
