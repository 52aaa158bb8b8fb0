//! Results an enqueuer awaits (`jobqueue_core::result`, `wait_result`):
//! what a handler recorded, read after its row is gone, for as long as
//! the retention keeps it; what became of jobs that recorded none; a
//! result kept only when its completion commits; a worker in another
//! process; the testing kit's drain.

use std::process::{Command, Stdio};
use std::time::Duration;

use diesel::prelude::*;
use jobqueue_core::engine::{Claim, StepDone, claim, complete_with_result};
use jobqueue_core::{Job, JobResult, JobStatus, Retention, result, wait_result};
use jobqueue_runner::{JobContext, JobError, Perform, Registry, RunnerConfig};
use jobqueue_tests::jobs::StepJob;
use jobqueue_tests::{TestDb, start_runner, wait_for};
use serde::{Deserialize, Serialize};

const WORKER: &str = env!("CARGO_BIN_EXE_jobqueue-test-worker");

/// What a quote's handler records.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct Price {
    cents: i64,
}

#[derive(Serialize, Deserialize, Job)]
#[job(type = "results.quote", queue = "results", max_attempts = 1)]
struct Quote {
    items: i64,
    /// Record no result; `fail`: fail for good.
    plain: bool,
    fail: bool,
}

/// Records a result past the 64 KiB a result may hold.
/// Stops as if a cancel were requested.
#[derive(Serialize, Deserialize, Job)]
#[job(type = "results.stop", queue = "results")]
struct Stop;

impl Perform for Stop {
    fn perform(&self, _ctx: &mut JobContext<'_>) -> Result<(), JobError> {
        Err(JobError::Cancelled)
    }
}

#[derive(Serialize, Deserialize, Job)]
#[job(type = "results.huge", queue = "results")]
struct Huge;

impl Perform for Huge {
    fn perform(&self, ctx: &mut JobContext<'_>) -> Result<(), JobError> {
        ctx.set_result(&"x".repeat(70 * 1024))
    }
}

impl Perform for Quote {
    fn perform(&self, ctx: &mut JobContext<'_>) -> Result<(), JobError> {
        if self.fail {
            return Err(JobError::fail("no price for that"));
        }
        if !self.plain {
            ctx.set_result(&Price {
                cents: self.items * 250,
            })?;
        }
        Ok(())
    }
}

fn quote(items: i64) -> Quote {
    Quote {
        items,
        plain: false,
        fail: false,
    }
}

/// A quote that fails for good.
fn failing() -> Quote {
    Quote {
        fail: true,
        ..quote(1)
    }
}

/// A quote that records no result.
fn no_result() -> Quote {
    Quote {
        plain: true,
        ..quote(1)
    }
}

fn config(db: &TestDb) -> RunnerConfig {
    RunnerConfig::new(&db.url)
        .queues(["results"])
        .concurrency(2)
}

fn registry() -> Registry {
    Registry::new()
        .register::<Quote>()
        .register::<Huge>()
        .register::<Stop>()
}

#[test]
fn a_waiter_gets_the_result_its_job_recorded_after_the_row_is_deleted() {
    let (db, mut conn) = TestDb::connected();
    let id = quote(4).enqueue(&mut conn).expect("enqueue").id();
    // The waiter waits before any runner starts, on a connection of its own.
    let url = db.url.clone();
    let waiter = std::thread::spawn(move || {
        let mut conn = PgConnection::establish(&url).expect("connect");
        wait_result::<Price>(&mut conn, id, Duration::from_secs(60))
    });
    let runner = start_runner(config(&db), registry());
    let got = waiter.join().expect("the waiter").expect("wait");
    runner.shutdown();
    assert_eq!(got, JobResult::Completed(Some(Price { cents: 1000 })));
    // Completed rows are deleted as they complete: the result outlives it.
    let rows = jobqueue_tests::scalar(
        &mut conn,
        &format!("SELECT count(*) AS n FROM jobqueue_jobs WHERE id = '{id}'"),
    );
    assert_eq!(rows, 0);
    assert_eq!(
        result::<Price>(&mut conn, id).expect("read"),
        JobResult::Completed(Some(Price { cents: 1000 }))
    );
    // Read as another type, it says what did not decode.
    let wrong = result::<String>(&mut conn, id).expect_err("not a string");
    assert!(
        wrong
            .to_string()
            .contains(&format!("the result kept for job {id} does not decode as")),
        "{wrong}"
    );
}

#[test]
fn what_became_of_jobs_that_recorded_no_result() {
    let (db, mut conn) = TestDb::connected();
    let failed = failing().enqueue(&mut conn).expect("enqueue").id();
    let plain = no_result().enqueue(&mut conn).expect("enqueue").id();
    let cancelled = quote(1).enqueue(&mut conn).expect("enqueue").id();
    jobqueue_core::cancel(&mut conn, cancelled).expect("cancel");
    // Not worked yet: pending, and a wait that runs out says so.
    assert_eq!(
        result::<Price>(&mut conn, plain).expect("read"),
        JobResult::Pending(JobStatus::Pending)
    );
    assert_eq!(
        wait_result::<Price>(&mut conn, plain, Duration::from_millis(300)).expect("wait"),
        JobResult::Pending(JobStatus::Pending)
    );
    let runner = start_runner(config(&db), registry());
    // A failure sends no notification: the waiter's look again finds it.
    assert_eq!(
        wait_result::<Price>(&mut conn, failed, Duration::from_secs(60)).expect("wait"),
        JobResult::Failed("no price for that".into())
    );
    wait_for("the plain job", Duration::from_secs(60), || {
        runner.stats().completed == 1
    });
    runner.shutdown();
    assert_eq!(
        result::<Price>(&mut conn, cancelled).expect("read"),
        JobResult::Cancelled
    );
    // Completed without a result, its row deleted: nothing is kept.
    assert_eq!(
        result::<Price>(&mut conn, plain).expect("read"),
        JobResult::Gone
    );
    assert_eq!(
        result::<Price>(&mut conn, jobqueue_core::JobId::new()).expect("read"),
        JobResult::Gone
    );

    // With completed rows kept, it is seen completed, without a result.
    let kept = no_result().enqueue(&mut conn).expect("enqueue").id();
    let runner = start_runner(
        config(&db).keep_completed(Duration::from_secs(3600)),
        registry(),
    );
    assert_eq!(
        wait_result::<Price>(&mut conn, kept, Duration::from_secs(60)).expect("wait"),
        JobResult::Completed(None)
    );
    runner.shutdown();
}

#[test]
fn a_result_is_kept_for_its_retention_and_pruned_after() {
    let (db, mut conn) = TestDb::connected();
    let id = quote(2).enqueue(&mut conn).expect("enqueue").id();
    let mut config = config(&db);
    config.retention = Retention::default().results(Some(Duration::ZERO));
    let runner = start_runner(config, registry());
    wait_for("the quote", Duration::from_secs(60), || {
        runner.stats().completed == 1
    });
    runner.shutdown();
    // Kept for no time: expired at once, never read, pruned.
    assert_eq!(
        result::<Price>(&mut conn, id).expect("read"),
        JobResult::Gone
    );
    let stored = || {
        jobqueue_tests::scalar(
            &mut db.conn(),
            &format!("SELECT count(*) AS n FROM jobqueue_results WHERE job_id = '{id}'"),
        )
    };
    assert_eq!(stored(), 1);
    let pruned = jobqueue_core::engine::prune(&mut conn, &Retention::default()).expect("prune");
    assert_eq!(pruned.results, 1);
    assert_eq!(stored(), 0);
}

#[test]
fn a_result_is_kept_only_when_its_jobs_completion_commits() {
    let (_db, mut conn) = TestDb::connected();
    let id = quote(3).enqueue(&mut conn).expect("enqueue").id();
    let rows = claim(&mut conn, &Claim::new("results").limit(1)).expect("claim");
    let lease = rows[0].lease();
    // Rescued and claimed again elsewhere meanwhile: the lease is lost.
    diesel::sql_query("UPDATE jobqueue_jobs SET claim_count = claim_count + 1 WHERE id = $1")
        .bind::<diesel::sql_types::Uuid, _>(id)
        .execute(&mut conn)
        .expect("take the lease");
    let done = StepDone {
        lease,
        result: Some(r#"{"cents": 750}"#.into()),
    };
    let refused = complete_with_result(&mut conn, &done, true, Some(Duration::from_secs(60)));
    assert!(
        matches!(refused, Err(jobqueue_core::Error::LeaseLost { .. })),
        "{refused:?}"
    );
    assert_eq!(
        result::<Price>(&mut conn, id).expect("read"),
        JobResult::Pending(JobStatus::Claimed)
    );
    let kept = jobqueue_tests::scalar(&mut conn, "SELECT count(*) AS n FROM jobqueue_results");
    assert_eq!(kept, 0, "a fenced-out completion keeps no result");
}

#[test]
fn a_wait_inside_a_transaction_is_refused_naming_it() {
    let (_db, mut conn) = TestDb::connected();
    let id = quote(1).enqueue(&mut conn).expect("enqueue").id();
    let refused = conn.transaction(|conn| {
        Ok::<_, diesel::result::Error>(wait_result::<Price>(conn, id, Duration::from_secs(1)))
    });
    let error = refused.expect("the transaction").expect_err("refused");
    assert!(
        error.to_string().contains("outside a transaction"),
        "{error}"
    );
}

#[test]
fn a_waiter_hears_from_a_worker_in_another_process() {
    let (db, mut conn) = TestDb::connected();
    jobqueue_tests::jobs::create_side_tables(&mut conn);
    let job = StepJob {
        n: 42,
        ms: 0,
        fail: false,
    };
    let id = job.enqueue(&mut conn).expect("enqueue").id();
    let mut worker = Command::new(WORKER)
        .arg("--database-url")
        .arg(&db.url)
        .args(["work", "--concurrency", "2"])
        .env("RUST_LOG", "warn")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start the worker process");
    let got = wait_result::<i64>(&mut conn, id, Duration::from_secs(60));
    let _ = Command::new("kill")
        .args(["-TERM", &worker.id().to_string()])
        .status();
    let _ = worker.wait();
    assert_eq!(got.expect("wait"), JobResult::Completed(Some(42)));
}

#[test]
fn the_kits_drain_keeps_a_result_as_a_runner_does() {
    let (_db, mut conn) = TestDb::connected();
    let id = quote(5).enqueue(&mut conn).expect("enqueue").id();
    let drained = jobqueue_testing::Drain::new(&registry())
        .queue("results")
        .run(&mut conn)
        .expect("drain");
    assert_eq!(drained.jobs.len(), 1, "{drained}");
    assert_eq!(
        result::<Price>(&mut conn, id).expect("read"),
        JobResult::Completed(Some(Price { cents: 1250 }))
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_handler_awaits_its_jobs_result_on_diesel_async() {
    use diesel_async::{AsyncConnection, AsyncPgConnection};
    let db = TestDb::new();
    let mut conn = AsyncPgConnection::establish(&db.url)
        .await
        .expect("connect");
    let id = jobqueue_core::enqueue_async(
        &mut conn,
        &jobqueue_core::NewJob::from_job(&quote(6), jobqueue_core::JobOptions::new())
            .expect("a job"),
    )
    .await
    .expect("enqueue")
    .id();
    let pending = jobqueue_core::result_async::<Price>(&mut conn, id)
        .await
        .expect("read");
    assert_eq!(pending, JobResult::Pending(JobStatus::Pending));
    let runner = start_runner(config(&db), registry());
    let got = jobqueue_core::wait_result_async::<Price>(&mut conn, id, Duration::from_secs(60))
        .await
        .expect("wait");
    tokio::task::spawn_blocking(move || runner.shutdown())
        .await
        .expect("shut down");
    assert_eq!(got, JobResult::Completed(Some(Price { cents: 1500 })));
}

#[test]
fn jobqueue_show_prints_a_kept_result_with_the_row_or_without_it() {
    let (db, mut conn) = TestDb::connected();
    let id = quote(8).enqueue(&mut conn).expect("enqueue").id();
    let runner = start_runner(config(&db), registry());
    wait_for("the quote", Duration::from_secs(60), || {
        runner.stats().completed == 1
    });
    runner.shutdown();
    let show = |json: bool| {
        let mut command = Command::new(WORKER);
        command
            .arg("--database-url")
            .arg(&db.url)
            .arg("show")
            .arg(id.to_string());
        if json {
            command.arg("--json");
        }
        let out = command.output().expect("run show");
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).expect("text")
    };
    // Its row was deleted as it completed; its result is kept.
    let text = show(false);
    assert!(
        text.contains("its row was deleted; its result is kept"),
        "{text}"
    );
    assert!(text.contains(r#"result:        {"cents":2000}"#), "{text}");
    let json: serde_json::Value = serde_json::from_str(&show(true)).expect("JSON");
    assert_eq!(json["status"], "completed");
    assert_eq!(json["result"]["cents"], 2000);
    assert!(json["row"].is_null());
}

#[test]
fn a_workflow_steps_result_is_read_as_any_jobs() {
    let (db, mut conn) = TestDb::connected();
    let mut flow = jobqueue_core::Workflow::new("quotes").expect("workflow");
    let first = flow.add("first", &quote(3)).expect("step");
    let then = flow.add("then", &quote(4)).expect("step");
    flow.after(then, [first]).expect("edge");
    let enqueued = flow.enqueue(&mut conn).expect("enqueue");
    assert_eq!(enqueued.steps.len(), 2);
    let runner = start_runner(config(&db), registry());
    // The step waits behind its parent; its result is kept with the
    // workflow's steps, its row deleted as it completed.
    let got = wait_result::<Price>(&mut conn, then.id(), Duration::from_secs(60));
    runner.shutdown();
    assert_eq!(
        got.expect("wait"),
        JobResult::Completed(Some(Price { cents: 1000 }))
    );
    assert_eq!(
        result::<Price>(&mut conn, first.id()).expect("read"),
        JobResult::Completed(Some(Price { cents: 750 }))
    );
}

#[test]
fn a_result_past_its_size_fails_the_job_for_good_saying_so() {
    let (db, mut conn) = TestDb::connected();
    let id = Huge.enqueue(&mut conn).expect("enqueue").id();
    let runner = start_runner(config(&db), registry());
    let got = wait_result::<String>(&mut conn, id, Duration::from_secs(60)).expect("wait");
    runner.shutdown();
    let JobResult::Failed(error) = got else {
        panic!("failed for good, not retried: {got:?}");
    };
    assert!(
        error.contains("bytes of JSON; a job's result holds at most 65536"),
        "{error}"
    );
    let kept = jobqueue_tests::scalar(&mut conn, "SELECT count(*) AS n FROM jobqueue_results");
    assert_eq!(kept, 0);
}

#[test]
fn a_failure_and_a_cancellation_tell_their_waiters_at_once() {
    let (db, mut conn) = TestDb::connected();
    let mut listening = db.conn();
    diesel::sql_query("LISTEN jobqueue_results")
        .execute(&mut listening)
        .expect("listen");
    let failed = failing().enqueue(&mut conn).expect("enqueue").id();
    let stopped = Stop.enqueue(&mut conn).expect("enqueue").id();
    let cancelled = quote(1).enqueue(&mut conn).expect("enqueue").id();
    // Cancelled before any runner: at once, by the cancel itself.
    jobqueue_core::cancel(&mut conn, cancelled).expect("cancel");
    // Failed for good, and stopped by its handler, by the runner's flush.
    let runner = start_runner(config(&db), registry());
    let mut told = std::collections::HashSet::new();
    wait_for(
        "a notification for each end",
        Duration::from_secs(60),
        || {
            // A round trip, so what arrived is read.
            diesel::sql_query("SELECT 1")
                .execute(&mut listening)
                .expect("poll");
            for notification in listening.notifications_iter() {
                told.insert(notification.expect("a notification").payload);
            }
            [failed, stopped, cancelled]
                .iter()
                .all(|id| told.contains(&id.to_string()))
        },
    );
    runner.shutdown();
    assert_eq!(
        result::<Price>(&mut conn, stopped).expect("read"),
        JobResult::Cancelled
    );
}
