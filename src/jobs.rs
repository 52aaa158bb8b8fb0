//! Job types the tests work, in process and in the `jobqueue-test-worker`
//! binary. Each records what it did in `test_effects`, so tests can count
//! executions from outside the runner.

use std::time::Duration;

use diesel::prelude::*;
use diesel::sql_types::{Integer, Text, Uuid};
use jobqueue_core::Job;
use jobqueue_runner::{JobContext, JobError, Perform};
use serde::{Deserialize, Serialize};

/// Creates the side tables the test jobs write to.
pub fn create_side_tables(conn: &mut PgConnection) {
    diesel::sql_query(
        "CREATE TABLE IF NOT EXISTS test_effects (
             job_id uuid NOT NULL,
             attempt int NOT NULL,
             kind text NOT NULL,
             at timestamptz NOT NULL DEFAULT clock_timestamp())",
    )
    .execute(conn)
    .expect("create test_effects");
}

/// Records `kind` for the running attempt, on `conn`.
fn record_on(
    conn: &mut PgConnection,
    ctx_id: jobqueue_core::JobId,
    attempt: i32,
    kind: &str,
) -> Result<(), JobError> {
    diesel::sql_query("INSERT INTO test_effects (job_id, attempt, kind) VALUES ($1, $2, $3)")
        .bind::<Uuid, _>(ctx_id)
        .bind::<Integer, _>(attempt)
        .bind::<Text, _>(kind)
        .execute(conn)?;
    Ok(())
}

/// Records `kind` for the running attempt, committed at once.
pub fn record(ctx: &mut JobContext<'_>, kind: &str) -> Result<(), JobError> {
    let (id, attempt) = (ctx.job_id(), ctx.attempt());
    record_on(ctx.conn()?, id, attempt, kind)
}

/// Records one `run` and succeeds.
#[derive(Debug, Serialize, Deserialize)]
pub struct Noop {
    /// Any number.
    pub n: u64,
}

impl Job for Noop {
    const JOB_TYPE: &'static str = "test.noop";
}

impl Perform for Noop {
    fn perform(&self, ctx: &mut JobContext<'_>) -> Result<(), JobError> {
        record(ctx, "run")
    }
}

/// Records `start`, sleeps, records `done`.
#[derive(Debug, Serialize, Deserialize)]
pub struct Sleep {
    /// How long, in milliseconds.
    pub ms: u64,
}

impl Job for Sleep {
    const JOB_TYPE: &'static str = "test.sleep";
}

impl Perform for Sleep {
    fn perform(&self, ctx: &mut JobContext<'_>) -> Result<(), JobError> {
        record(ctx, "start")?;
        std::thread::sleep(Duration::from_millis(self.ms));
        record(ctx, "done")
    }
}

/// Panics on every attempt.
#[derive(Debug, Serialize, Deserialize)]
pub struct Panic {}

impl Job for Panic {
    const JOB_TYPE: &'static str = "test.panic";
    const MAX_ATTEMPTS: i32 = 2;
}

impl Perform for Panic {
    fn perform(&self, ctx: &mut JobContext<'_>) -> Result<(), JobError> {
        record(ctx, "run")?;
        panic!("deliberate panic in attempt {}", ctx.attempt());
    }
}

/// Writes its effect and completes in one transaction; with `pause`, its
/// first attempt then sleeps inside that transaction (to be killed there).
#[derive(Debug, Serialize, Deserialize)]
pub struct Effect {
    /// Sleep inside the transaction on the first attempt.
    pub pause: bool,
}

impl Job for Effect {
    const JOB_TYPE: &'static str = "test.effect";
}

impl Perform for Effect {
    fn perform(&self, ctx: &mut JobContext<'_>) -> Result<(), JobError> {
        let (id, attempt) = (ctx.job_id(), ctx.attempt());
        let pause = self.pause && attempt == 1;
        ctx.complete_in_transaction(|conn| {
            record_on(conn, id, attempt, "effect")?;
            if pause {
                std::thread::sleep(Duration::from_secs(120));
            }
            Ok(())
        })
    }
}

/// Runs until cancelled, then records `saw-cancel` and stops.
#[derive(Debug, Serialize, Deserialize)]
pub struct Cancellable {}

impl Job for Cancellable {
    const JOB_TYPE: &'static str = "test.cancellable";
}

impl Perform for Cancellable {
    fn perform(&self, ctx: &mut JobContext<'_>) -> Result<(), JobError> {
        record(ctx, "start")?;
        for _ in 0..600 {
            if ctx.is_cancelled() {
                record(ctx, "saw-cancel")?;
                return Err(JobError::Cancelled);
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        Err(JobError::permanent("never saw the cancel request"))
    }
}

/// Registers every test job type.
pub fn registry() -> jobqueue_runner::Registry {
    jobqueue_runner::Registry::new()
        .register::<Noop>()
        .register::<Sleep>()
        .register::<Panic>()
        .register::<Effect>()
        .register::<Cancellable>()
}
