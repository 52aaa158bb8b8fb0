//! The building blocks of a runner: claiming due jobs, finishing and
//! extending the leases it holds, the maintenance passes (promote, rescue,
//! reclaim, prune, fire schedules, the indexes' upkeep), the reading of the
//! xmin horizon, the runner registry and the hot-path session with its
//! prepared statements.
//!
//! An application enqueues and administers jobs with the crate's top level
//! and runs the `jobqueue-runner` crate's runner; it reaches in here only to
//! build a worker loop of its own. Every call that changes a held job takes
//! its [`Lease`] and applies only while the lease's fencing token matches,
//! so a worker that lost its job can change nothing.
//!
//! ```no_run
//! use diesel::prelude::*;
//! use jobqueue_core::engine::{Claim, Failure, claim, complete, fail};
//! use jobqueue_core::{Job, RetryPolicy};
//! use serde::{Deserialize, Serialize};
//!
//! #[derive(Serialize, Deserialize)]
//! struct Resize { image: String }
//! impl Job for Resize { const JOB_TYPE: &'static str = "image.resize"; }
//!
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let mut conn = PgConnection::establish("postgres://postgres@127.0.0.1/app")?;
//! for job in claim(&mut conn, &Claim::new("worker-1").limit(50))? {
//!     let payload: Resize = job.payload_as()?;
//!     match std::fs::metadata(&payload.image) {
//!         Ok(_) => complete(&mut conn, &job.lease())?,
//!         Err(e) => {
//!             let failure = Failure::retry(job.lease(), e.to_string(), &RetryPolicy::default());
//!             fail(&mut conn, &failure)?;
//!         }
//!     }
//! }
//! # Ok(())
//! # }
//! ```

/// What a worker runs on a new connection, and to check one: whether the
/// server takes writes, the setup of a connection dedicated to the queue,
/// the server's version, the session's server process and TCP ends,
/// `LISTEN`.
pub mod connection {
    pub use crate::connection::*;
}

pub use crate::admission::{
    NewAdmitted, NewCursor, QueueKey, Sweep, admit_keys, admit_keys_in_line, admit_new,
    any_waiting, sweep_keys,
};
pub use crate::claim::{
    Claim, Claimed, DEFAULT_LEASE, GlobalLimits, MAX_CLAIM_QUEUES, Resume, claim, claim_paced,
};
pub use crate::connection::{backend_pid, server_version};
pub use crate::database_url::{
    DEFAULT_CONNECT_TIMEOUT, connectable_url, join_options, split_options, with_database,
    with_default_options,
};
pub use crate::durable_step::{
    MAX_CURSOR_BYTES, MAX_STEP_OUTPUT_BYTES, MAX_STEPS, RecordedStep, record_cursor, record_step,
    recorded_step,
};
pub use crate::enqueue::{NOTIFY_CHANNEL, NOTIFY_DEBOUNCE};
pub use crate::enqueue_hooks::hooked;
pub use crate::finish::{
    FailOutcome, FailedMany, Failure, cancel_held_many, complete_and_delete_many, complete_many,
    fail, fail_many, park_many, release_many, start_many,
};
pub use crate::heartbeat::{
    Beat, Heartbeat, Progress, heartbeat_many, heartbeat_with_progress, report_progress,
};
pub use crate::horizon::{Holder, Horizon, Pin, SessionHold, xmin_horizon};
pub use crate::index_rebuild::{
    IndexSize, LIVE_JOB_INDEXES, cancel_backend, drop_rebuild_leftovers, index_sizes,
    rebuild_index, try_lock_index_upkeep, unlock_index_upkeep,
};
pub use crate::job_result::complete_with_result;
pub use crate::lease::{Fenced, Lease};
pub use crate::periodic::{FirePass, ORPHANED_AFTER, declare_schedules, fire_due};
pub use crate::plan::{HotStatement, Plan, TableRead};
pub use crate::prune::{COUNTS_KEPT, Pruned, prune};
pub use crate::queue_head::{MAX_QUEUE_HEADS, QueueHead, queue_head, queue_heads};
pub use crate::ready::{DEFAULT_PROMOTE_BATCH, promote_due, promote_due_by, reclaim_unhandled};
pub use crate::rescue::{DEFAULT_RESCUE_BATCH, Rescued, rescue_stale};
pub use crate::runners::{
    MaintenanceBeat, RunnerInfo, deregister_runner, register_runner, runner_seen,
    try_lead_queue_gauges, types_handled_elsewhere,
};
pub use crate::session::QueueSession;
pub use crate::set_aside::{SetAside, set_aside_due};
pub use crate::snooze::{DEFAULT_MAX_SNOOZES, Snooze, Snoozed, snooze_many};
pub use crate::stats::completed_within;
#[cfg(feature = "tracing")]
pub use crate::trace_context::enqueuer_context;
pub use crate::vacuum::Vacuumed;
pub use crate::workflow_release::{
    DEFAULT_SETTLE_BATCH, MAX_RESULT_BYTES, Settled, StepDone, check_result, complete,
    complete_and_delete, complete_step, complete_steps_many, settle_ended, settle_ended_of,
    settle_ended_page,
};
pub use crate::workflow_show::parent_results;
