//! A periodic job's payload, enqueued as one of its slots would enqueue it.

use diesel::PgConnection;
use jobqueue_core::{JobId, Periodic, Result};

/// Enqueues `schedule`'s job now, as one of its slots would (its queue,
/// priority and payload), after declaring the schedule: both inside the
/// connection's transaction, so a test transaction leaves neither behind.
/// Returns the job's id; [`expect`](crate::expect) finds it.
pub fn enqueue_schedule(conn: &mut PgConnection, schedule: &Periodic) -> Result<JobId> {
    jobqueue_core::engine::declare_schedules(conn, std::slice::from_ref(schedule))?;
    jobqueue_core::run_schedule_now(conn, schedule.name())
}
