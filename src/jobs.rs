//! Job types the tests work, in process and in the `jobqueue-test-worker`
//! binary. Each records what it did in `test_effects`, so tests can count
//! executions from outside the runner.

use std::time::Duration;

use diesel::prelude::*;
use diesel::sql_types::{Integer, Nullable, Text, Timestamptz, Uuid};
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
             at timestamptz NOT NULL DEFAULT clock_timestamp(),
             runner text,
             local_at timestamptz)",
    )
    .execute(conn)
    .expect("create test_effects");
}

/// Records `kind` for attempt `attempt` of job `ctx_id`, on `conn` (in
/// whatever transaction it is in).
pub fn record_on(
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

/// Records `kind` for the running attempt, on `conn`, with the worker id
/// that claimed it (`runner`) and the handler process's own clock
/// (`local_at`), which may differ from the database's.
fn record_detailed(
    conn: &mut PgConnection,
    ctx_id: jobqueue_core::JobId,
    attempt: i32,
    kind: &str,
    runner: Option<&str>,
) -> Result<(), JobError> {
    diesel::sql_query(
        "INSERT INTO test_effects (job_id, attempt, kind, runner, local_at) \
         VALUES ($1, $2, $3, $4, $5)",
    )
    .bind::<Uuid, _>(ctx_id)
    .bind::<Integer, _>(attempt)
    .bind::<Text, _>(kind)
    .bind::<Nullable<Text>, _>(runner)
    .bind::<Timestamptz, _>(chrono::Utc::now())
    .execute(conn)?;
    Ok(())
}

/// Records `kind` for the running attempt, committed at once.
pub fn record(ctx: &mut JobContext<'_>, kind: &str) -> Result<(), JobError> {
    let (id, attempt) = (ctx.job_id(), ctx.attempt());
    record_on(ctx.conn()?, id, attempt, kind)
}

/// A job type with declarations of its own (queue, priority, attempts), as
/// an application's would: the command line's `enqueue` applies them. Does
/// nothing.
#[derive(Debug, Serialize, Deserialize, Job)]
#[job(type = "email.send", priority = 150, queue = "mail", max_attempts = 5)]
pub struct SendEmail {
    /// The address.
    pub to: String,
    /// The subject line.
    pub subject: String,
}

impl Perform for SendEmail {
    fn perform(&self, _ctx: &mut JobContext<'_>) -> Result<(), JobError> {
        Ok(())
    }
}

/// Records one `run` and succeeds.
#[derive(Debug, Serialize, Deserialize, Job)]
#[job(type = "test.noop")]
pub struct Noop {
    /// Any number.
    pub n: u64,
}

impl Perform for Noop {
    fn perform(&self, ctx: &mut JobContext<'_>) -> Result<(), JobError> {
        record(ctx, "run")
    }
}

/// Records `start`, sleeps, records `done`.
#[derive(Debug, Serialize, Deserialize, Job)]
#[job(type = "test.sleep")]
pub struct Sleep {
    /// How long, in milliseconds.
    pub ms: u64,
}

impl Perform for Sleep {
    fn perform(&self, ctx: &mut JobContext<'_>) -> Result<(), JobError> {
        record(ctx, "start")?;
        std::thread::sleep(Duration::from_millis(self.ms));
        record(ctx, "done")
    }
}

/// Notes the handler process's clock as it enters (before anything else,
/// a connection included), sleeps, then records `start` with that time in
/// `local_at`: the start a third-party API called first thing would see.
#[derive(Debug, Serialize, Deserialize, Job)]
#[job(type = "test.entry")]
pub struct Entry {
    /// How long it works, in milliseconds.
    pub ms: u64,
}

impl Perform for Entry {
    fn perform(&self, ctx: &mut JobContext<'_>) -> Result<(), JobError> {
        let entered = chrono::Utc::now();
        std::thread::sleep(Duration::from_millis(self.ms));
        let (id, attempt) = (ctx.job_id(), ctx.attempt());
        diesel::sql_query(
            "INSERT INTO test_effects (job_id, attempt, kind, local_at) \
             VALUES ($1, $2, 'start', $3)",
        )
        .bind::<Uuid, _>(id)
        .bind::<Integer, _>(attempt)
        .bind::<Timestamptz, _>(entered)
        .execute(ctx.conn()?)?;
        Ok(())
    }
}

/// Records `start`, sleeps, then on its first attempt stumbles as `first`
/// says (`fail`: a failure to retry 20 ms later; `snooze`: a snooze of 50
/// ms) and records it; any other attempt, or `first` empty, records `done`.
#[derive(Debug, Serialize, Deserialize, Job)]
#[job(type = "test.stumble", backoff_base_ms = 20, backoff_max_secs = 1)]
pub struct Stumble {
    /// How long each attempt takes, in milliseconds.
    pub ms: u64,
    /// What the first attempt does: `fail`, `snooze`, or `` (nothing).
    pub first: String,
}

impl Perform for Stumble {
    fn perform(&self, ctx: &mut JobContext<'_>) -> Result<(), JobError> {
        record(ctx, "start")?;
        std::thread::sleep(Duration::from_millis(self.ms));
        let first = ctx.attempt() == 1 && ctx.row().snoozes == 0;
        match self.first.as_str() {
            "fail" if first => {
                record(ctx, "fail")?;
                Err(JobError::retry("stumbled on the first attempt"))
            }
            "snooze" if first => {
                record(ctx, "snooze")?;
                Err(JobError::snooze(Duration::from_millis(50)))
            }
            _ => record(ctx, "done"),
        }
    }
}

/// Panics on every attempt.
#[derive(Debug, Serialize, Deserialize, Job)]
#[job(type = "test.panic", max_attempts = 2)]
pub struct Panic {}

impl Perform for Panic {
    fn perform(&self, ctx: &mut JobContext<'_>) -> Result<(), JobError> {
        record(ctx, "run")?;
        panic!("deliberate panic in attempt {}", ctx.attempt());
    }
}

/// Writes its effect and completes in one transaction; with `pause`, its
/// first attempt then sleeps inside that transaction (to be killed there).
#[derive(Debug, Serialize, Deserialize, Job)]
#[job(type = "test.effect")]
pub struct Effect {
    /// Sleep inside the transaction on the first attempt.
    pub pause: bool,
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
#[derive(Debug, Serialize, Deserialize, Job)]
#[job(type = "test.cancellable")]
pub struct Cancellable {}

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
        Err(JobError::fail("never saw the cancel request"))
    }
}

/// The crash-chaos workload. With `exactly_once`, writes its `effect` row
/// and completes the job in one transaction, sleeping `ms` inside it (a kill
/// there must leave neither); otherwise records its `attempt` (committed at
/// once), sleeps `ms` and lets the runner complete it (at-least-once). Both
/// rows carry the claiming worker's id in `runner`.
#[derive(Debug, Serialize, Deserialize, Job)]
// Many kills may hit the same job; it must never run out of attempts.
#[job(type = "test.chaos", max_attempts = 50)]
pub struct Chaos {
    /// Effect and completion in one transaction.
    pub exactly_once: bool,
    /// How long each execution takes, in milliseconds.
    pub ms: u64,
}

impl Chaos {
    /// The crash-chaos workload: `n` jobs of `ms` each, every other one
    /// exactly-once.
    pub fn mix(n: usize, ms: u64) -> impl Iterator<Item = Chaos> {
        (0..n).map(move |i| Chaos {
            exactly_once: i % 2 == 0,
            ms,
        })
    }
}

impl Perform for Chaos {
    fn perform(&self, ctx: &mut JobContext<'_>) -> Result<(), JobError> {
        let (id, attempt) = (ctx.job_id(), ctx.attempt());
        let runner = ctx.row().worker_id.clone();
        let pause = Duration::from_millis(self.ms);
        if self.exactly_once {
            ctx.complete_in_transaction(|conn| {
                record_detailed(conn, id, attempt, "effect", runner.as_deref())?;
                std::thread::sleep(pause);
                Ok(())
            })
        } else {
            record_detailed(ctx.conn()?, id, attempt, "attempt", runner.as_deref())?;
            std::thread::sleep(pause);
            Ok(())
        }
    }
}

/// Sleeps `ms`, then fails for good: one attempt, whose failure (or the
/// loss of its runner) makes it a dead letter.
#[derive(Debug, Serialize, Deserialize, Job)]
#[job(type = "test.doomed", max_attempts = 1)]
pub struct Doomed {
    /// How long the attempt takes, in milliseconds.
    pub ms: u64,
}

impl Perform for Doomed {
    fn perform(&self, _ctx: &mut JobContext<'_>) -> Result<(), JobError> {
        std::thread::sleep(Duration::from_millis(self.ms));
        Err(JobError::fail("doomed"))
    }
}

/// A lifecycle handler that records each dead letter as a `dead` effect,
/// through the transaction that fails the job (so once per failed job).
#[derive(Debug)]
pub struct DeadLetters;

impl jobqueue_runner::Lifecycle for DeadLetters {
    fn failed(&self, job: &jobqueue_core::JobRow, conn: &mut PgConnection) -> Result<(), String> {
        record_on(conn, job.id, job.attempts, "dead").map_err(|e| e.to_string())
    }
}

/// A job of `steps` durable steps, `step-0`, `step-1`, ...: each records
/// its name as an effect through the connection it is given, sleeps `ms`
/// and returns its number times ten; the handler checks that each step
/// returned that (recorded or run). Its first attempt fails (a retry) at
/// step `fail_first_at`, if set, after that step's effect (rolled back
/// with it).
#[derive(Debug, Serialize, Deserialize, Job)]
#[job(type = "test.stepped", max_attempts = 50)]
pub struct Stepped {
    /// Its steps.
    pub steps: u32,
    /// Milliseconds each step sleeps.
    pub ms: u64,
    /// The step its first attempt fails at, if any.
    pub fail_first_at: Option<u32>,
}

impl Perform for Stepped {
    fn perform(&self, ctx: &mut JobContext<'_>) -> Result<(), JobError> {
        let (id, attempt) = (ctx.job_id(), ctx.attempt());
        for i in 0..self.steps {
            let name = format!("step-{i}");
            let out: u32 = ctx.step(&name, |conn| {
                record_on(conn, id, attempt, &name)?;
                std::thread::sleep(std::time::Duration::from_millis(self.ms));
                if attempt == 1 && self.fail_first_at == Some(i) {
                    return Err(JobError::retry(format!(
                        "{name} failed on the first attempt"
                    )));
                }
                Ok(i * 10)
            })?;
            if out != i * 10 {
                return Err(JobError::fail(format!(
                    "{name} returned {out}, not {}",
                    i * 10
                )));
            }
        }
        Ok(())
    }
}

/// A job that loops over `items` items, `item-0`, `item-1`, ..., with a
/// durable cursor: it starts at the cursor an earlier attempt advanced (or
/// 0), and records each item's name as an effect and advances the cursor
/// past it in one transaction (`JobContext::advance_with`), sleeping `ms`.
/// Its first attempt fails (a retry) at item `fail_first_at`, if set, after
/// that item's effect (rolled back with it).
#[derive(Debug, Serialize, Deserialize, Job)]
#[job(type = "test.cursored", max_attempts = 50)]
pub struct Cursored {
    /// Its items.
    pub items: u32,
    /// Milliseconds each item sleeps.
    pub ms: u64,
    /// The item its first attempt fails at, if any.
    pub fail_first_at: Option<u32>,
}

impl Perform for Cursored {
    fn perform(&self, ctx: &mut JobContext<'_>) -> Result<(), JobError> {
        let (id, attempt) = (ctx.job_id(), ctx.attempt());
        let mut next: u32 = ctx.cursor()?.unwrap_or(0);
        while next < self.items {
            let name = format!("item-{next}");
            ctx.advance_with(&(next + 1), |conn| {
                record_on(conn, id, attempt, &name)?;
                std::thread::sleep(std::time::Duration::from_millis(self.ms));
                if attempt == 1 && self.fail_first_at == Some(next) {
                    return Err(JobError::retry(format!(
                        "{name} failed on the first attempt"
                    )));
                }
                Ok(())
            })?;
            next += 1;
        }
        Ok(())
    }
}

/// A job the enqueue hooks of `tests/it/enqueue_hooks.rs` act on (and no
/// other job): its handler fails, permanently, unless the job carries the
/// `hooked` metadata [`HookedStamp`] stamps.
#[derive(Debug, Serialize, Deserialize, Job)]
#[job(type = "test.hooked")]
pub struct Hooked {
    /// Any number.
    pub n: u64,
    /// [`HookedStamp`] refuses the job.
    pub refuse: bool,
    /// [`HookedStamp`] moves the job to this queue.
    pub move_to: Option<String>,
}

impl Perform for Hooked {
    fn perform(&self, ctx: &mut JobContext<'_>) -> Result<(), JobError> {
        match ctx.row().meta("hooked") {
            Some(_) => Ok(()),
            None => Err(JobError::fail(format!("job {} was not stamped", self.n))),
        }
    }
}

/// An enqueue hook on [`Hooked`] jobs alone: stamps `hooked: "yes"` in
/// their metadata and tags them `hooked`, moves them where `move_to` says
/// (priority 900 then), and refuses those with `refuse`.
#[derive(Debug)]
pub struct HookedStamp;

impl jobqueue_core::EnqueueHook for HookedStamp {
    fn before_insert(&self, job: &mut jobqueue_core::NewJob) -> Result<(), String> {
        if job.job_type() != Hooked::JOB_TYPE {
            return Ok(());
        }
        let hooked: Hooked = serde_json::from_str(job.payload_json()).map_err(|e| e.to_string())?;
        if hooked.refuse {
            return Err(format!("job {} asked to be refused", hooked.n));
        }
        job.set_meta("hooked", "yes").map_err(|e| e.to_string())?;
        job.add_tag("hooked").map_err(|e| e.to_string())?;
        if let Some(queue) = hooked.move_to {
            job.set_queue(queue).map_err(|e| e.to_string())?;
            job.set_priority(900).map_err(|e| e.to_string())?;
        }
        Ok(())
    }
}

/// Adds [`HookedStamp`] to this process's enqueue hooks, once.
pub fn install_hooked_stamp() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| jobqueue_core::add_enqueue_hook(HookedStamp));
}

/// Records `start`, then never returns (ignoring every stop request) on its
/// first attempt, or on every attempt with `every_attempt`; a later attempt
/// records `done` and succeeds. No timeout: only the runner's exit ends its
/// lease.
#[derive(Debug, Serialize, Deserialize, Job)]
#[job(type = "test.hang")]
pub struct Hang {
    /// Hang on every attempt, not just the first.
    pub every_attempt: bool,
}

impl Perform for Hang {
    fn perform(&self, ctx: &mut JobContext<'_>) -> Result<(), JobError> {
        hang_then_done(ctx, self.every_attempt)
    }
}

/// Like [`Hang`], with a 500 ms timeout: the runner stops renewing its lease
/// a lease after the timeout, so the job is recovered while the stuck
/// handler's runner lives on.
#[derive(Debug, Serialize, Deserialize, Job)]
#[job(type = "test.hang-timeout")]
pub struct HangTimeout {
    /// Hang on every attempt, not just the first.
    pub every_attempt: bool,
}

impl Perform for HangTimeout {
    const TIMEOUT: Option<Duration> = Some(Duration::from_millis(500));

    fn perform(&self, ctx: &mut JobContext<'_>) -> Result<(), JobError> {
        hang_then_done(ctx, self.every_attempt)
    }
}

/// [`Hang`]'s and [`HangTimeout`]'s handler: records `start`, hangs on the
/// first attempt (or on every one), records `done` on an attempt it lets run.
fn hang_then_done(ctx: &mut JobContext<'_>, every_attempt: bool) -> Result<(), JobError> {
    record(ctx, "start")?;
    if every_attempt || ctx.attempt() == 1 {
        hang_forever();
    }
    record(ctx, "done")
}

/// A handler that never returns and ignores every request to stop.
fn hang_forever() -> ! {
    loop {
        std::thread::sleep(Duration::from_secs(3600));
    }
}

/// For a runner frozen mid-job (SIGSTOP). Records `start` (committed), then
/// on its first attempt pauses `pause_ms`: with `exactly_once` inside the
/// transaction that writes its `effect` and completes the job, after which it
/// records `late-ok` or `late-refused`; otherwise before recording `done`
/// and letting the runner complete it. Later attempts do not pause.
#[derive(Debug, Serialize, Deserialize, Job)]
#[job(type = "test.stale")]
pub struct Stale {
    /// Effect and completion in one transaction.
    pub exactly_once: bool,
    /// The first attempt's pause, in milliseconds.
    pub pause_ms: u64,
}

impl Perform for Stale {
    fn perform(&self, ctx: &mut JobContext<'_>) -> Result<(), JobError> {
        let (id, attempt) = (ctx.job_id(), ctx.attempt());
        let runner = ctx.row().worker_id.clone();
        let pause = (attempt == 1).then(|| Duration::from_millis(self.pause_ms));
        record_detailed(ctx.conn()?, id, attempt, "start", runner.as_deref())?;
        if self.exactly_once {
            let result = ctx.complete_in_transaction(|conn| {
                record_detailed(conn, id, attempt, "effect", runner.as_deref())?;
                if let Some(pause) = pause {
                    std::thread::sleep(pause);
                }
                Ok(())
            });
            if pause.is_some() {
                let kind = if result.is_ok() {
                    "late-ok"
                } else {
                    "late-refused"
                };
                record_detailed(ctx.conn()?, id, attempt, kind, runner.as_deref())?;
            }
            result
        } else {
            if let Some(pause) = pause {
                std::thread::sleep(pause);
            }
            record_detailed(ctx.conn()?, id, attempt, "done", runner.as_deref())
        }
    }
}

/// Records `clock` with the handler process's own clock in `local_at` (the
/// row's `at` is the database's clock).
#[derive(Debug, Serialize, Deserialize, Job)]
#[job(type = "test.clock")]
pub struct ClockProbe {}

impl Perform for ClockProbe {
    fn perform(&self, ctx: &mut JobContext<'_>) -> Result<(), JobError> {
        let (id, attempt) = (ctx.job_id(), ctx.attempt());
        let runner = ctx.row().worker_id.clone();
        record_detailed(ctx.conn()?, id, attempt, "clock", runner.as_deref())
    }
}

/// A job whose type caps its payload at 4 KiB.
#[derive(Debug, Serialize, Deserialize, Job)]
#[job(type = "test.blob", max_payload_bytes = 4096)]
pub struct Blob {
    /// Any text.
    pub data: String,
}

impl Perform for Blob {
    fn perform(&self, ctx: &mut JobContext<'_>) -> Result<(), JobError> {
        record(ctx, "run")
    }
}

/// A workflow step: records `start`, sleeps `ms`, and records `done` with
/// a result that is its `n` plus its parents' results (numbers); with
/// `fail`, its first run ever (the first with no `fail` of its own
/// recorded) records `fail` instead and fails for good, so a retry of it
/// completes.
#[derive(Debug, Serialize, Deserialize, Job)]
#[job(type = "test.step", max_attempts = 1)]
pub struct StepJob {
    /// Its own part of the sum.
    pub n: i64,
    /// How long it works, in milliseconds.
    pub ms: u64,
    /// Fail for good on its first run.
    pub fail: bool,
}

impl Perform for StepJob {
    fn perform(&self, ctx: &mut JobContext<'_>) -> Result<(), JobError> {
        record(ctx, "start")?;
        std::thread::sleep(Duration::from_millis(self.ms));
        if self.fail {
            let id = ctx.job_id();
            let failed_before: i64 = diesel::sql_query(
                "SELECT count(*) AS n FROM test_effects WHERE job_id = $1 AND kind = 'fail'",
            )
            .bind::<Uuid, _>(id)
            .get_result::<Count>(ctx.conn()?)?
            .n;
            if failed_before == 0 {
                record(ctx, "fail")?;
                return Err(JobError::fail("this step fails on its first run"));
            }
        }
        let parents: i64 = ctx
            .parent_results()?
            .iter()
            .filter_map(|(_, result)| result.as_ref().and_then(serde_json::Value::as_i64))
            .sum();
        ctx.set_result(&(parents + self.n))?;
        record(ctx, "done")
    }
}

#[derive(QueryableByName)]
struct Count {
    #[diesel(sql_type = diesel::sql_types::BigInt)]
    n: i64,
}

/// Registers every test job type but [`SendEmail`], which the worker
/// binary adds the way an application registers its own.
pub fn registry() -> jobqueue_runner::Registry {
    jobqueue_runner::Registry::new()
        .register::<Noop>()
        .register::<Sleep>()
        .register::<Entry>()
        .register::<Stumble>()
        .register::<Panic>()
        .register::<Effect>()
        .register::<Cancellable>()
        .register::<Chaos>()
        .register::<Hang>()
        .register::<HangTimeout>()
        .register::<Stale>()
        .register::<ClockProbe>()
        .register::<Blob>()
        .register::<StepJob>()
        .register::<Doomed>()
        .register::<Hooked>()
        .register::<Stepped>()
        .register::<Cursored>()
}
