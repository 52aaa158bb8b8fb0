//! The runner in process: every job once, wake-ups by NOTIFY, panics, bad
//! payloads, cancellation, exactly-once effects.

use std::time::Duration;

use diesel::prelude::*;
use jobqueue_core::{CancelOutcome, Job, JobOptions, JobStatus, NewJob, RetryPolicy, enqueue_many};
use jobqueue_runner::{Runner, RunnerConfig};
use jobqueue_tests::jobs::{self, Cancellable, Effect, Noop, Panic, Sleep};
use jobqueue_tests::{
    TestDb, assert_contains, count_where, effects_where, enqueue_all, other_sessions, read_job,
    scalar, start_runner, time_to_complete, wait_completed, wait_count, wait_for, wait_status,
};
use jobqueue_tools::bench::BenchNoop;

fn config(db: &TestDb, concurrency: usize) -> RunnerConfig {
    let mut config = RunnerConfig::new(&db.url)
        .keep_completed(jobqueue_tests::KEEP_COMPLETED)
        .concurrency(concurrency)
        .lease(Duration::from_secs(3));
    config.retry = RetryPolicy {
        base: Duration::from_millis(50),
        max: Duration::from_millis(200),
        jitter: 0.1,
    };
    config.poll_interval = Duration::from_millis(200);
    config.shutdown_grace = Duration::from_secs(10);
    config
}

fn setup() -> (TestDb, PgConnection) {
    TestDb::with_side_tables()
}

#[test]
fn sixteen_workers_complete_every_job_exactly_once() {
    let (db, mut conn) = setup();
    const N: usize = 3000;
    let batch: Vec<NewJob> = (0..N as u64)
        .map(|n| NewJob::from_job(&Noop { n }, JobOptions::new().priority((n % 3) as i32)))
        .collect::<Result<_, _>>()
        .expect("build");
    enqueue_many(&mut conn, &batch).expect("enqueue");
    let runner = start_runner(config(&db, 16), jobs::registry());
    wait_count(&mut conn, "status = 'completed'", N as i64);
    let summary = runner.shutdown();
    assert_eq!(summary.stats.completed, N as u64);
    assert_eq!(summary.abandoned, 0);
    assert_eq!(
        effects_where(&mut conn, "kind = 'run'"),
        N as i64,
        "one execution per job"
    );
    let distinct = scalar(
        &mut conn,
        "SELECT count(DISTINCT job_id) AS n FROM test_effects",
    );
    assert_eq!(distinct, N as i64);
    assert_eq!(count_where(&mut conn, "attempts <> 1"), 0);
}

#[test]
fn an_idle_runner_with_a_60s_poll_is_woken_by_notify() {
    let (db, mut conn) = setup();
    let mut config = config(&db, 2);
    config.poll_interval = Duration::from_secs(60);
    let runner = start_runner(config, jobs::registry());
    // The runner's first claim finds nothing; it then sleeps on its poll.
    wait_for("the first, empty claim", Duration::from_secs(30), || {
        runner.stats().empty_claims >= 1
    });
    let waited = time_to_complete(&mut conn, |conn| {
        Noop { n: 1 }.enqueue(conn).expect("enqueue").id()
    });
    runner.shutdown();
    assert!(
        waited < Duration::from_secs(5),
        "woken after {waited:?}, not by the notification (the poll is 60 s)"
    );
}

#[test]
fn a_panicking_handler_is_retried_then_failed_with_the_message() {
    let (db, mut conn) = setup();
    let panic_id = Panic {}.enqueue(&mut conn).expect("enqueue").id();
    let ok_id = Noop { n: 7 }.enqueue(&mut conn).expect("enqueue").id();
    let runner = start_runner(config(&db, 2), jobs::registry());
    wait_status(&mut conn, panic_id, JobStatus::Failed);
    wait_completed(&mut conn, ok_id, Duration::from_secs(20));
    let summary = runner.shutdown();
    assert_eq!(summary.stats.panicked, 2);
    let job = read_job(&mut conn, panic_id);
    assert_eq!(job.attempts, 2);
    let error = job.last_error.expect("error kept");
    assert_contains(
        &error,
        &["test.panic", "panicked", "deliberate panic in attempt 2"],
    );
    assert_eq!(job.errors.as_array().map(Vec::len), Some(2));
    assert_eq!(
        effects_where(&mut conn, &format!("job_id = '{panic_id}'")),
        2
    );
}

#[test]
fn a_malformed_payload_fails_at_once_and_the_runner_goes_on() {
    let (db, mut conn) = setup();
    diesel::sql_query(
        "INSERT INTO jobqueue_jobs (id, job_type, payload, max_attempts)
         VALUES (gen_random_uuid(), 'test.noop', '{\"n\": \"not a number\"}', 5),
                (gen_random_uuid(), 'test.noop', '[1, 2, 3]', 5)",
    )
    .execute(&mut conn)
    .expect("insert malformed jobs");
    enqueue_all(&mut conn, (0..50).map(|n| Noop { n }));
    let runner = start_runner(config(&db, 4), jobs::registry());
    wait_count(&mut conn, "status IN ('completed', 'failed')", 52);
    runner.shutdown();
    assert_eq!(count_where(&mut conn, "status = 'completed'"), 50);
    assert_eq!(
        count_where(&mut conn, "status = 'failed' AND attempts = 1"),
        2,
        "failed at once, no retries"
    );
    let query = jobqueue_core::browse::JobQuery {
        status: Some(JobStatus::Failed),
        ..Default::default()
    };
    let errors: Vec<String> = jobqueue_core::browse::browse_jobs(&mut conn, &query, 50)
        .expect("list")
        .jobs
        .into_iter()
        .filter_map(|j| j.last_error)
        .collect();
    for error in &errors {
        assert!(
            error.contains("payload of job type `test.noop` does not decode"),
            "{error}"
        );
    }
    assert!(
        errors
            .iter()
            .any(|e| e.contains("invalid type: string \"not a number\"")),
        "{errors:?}"
    );
}

#[test]
fn cancelling_a_running_job_is_seen_by_its_handler() {
    let (db, mut conn) = setup();
    let id = Cancellable {}.enqueue(&mut conn).expect("enqueue").id();
    let mut config = config(&db, 1);
    config = config.lease(Duration::from_millis(900));
    let runner = start_runner(config, jobs::registry());
    wait_for("the handler to start", Duration::from_secs(10), || {
        effects_where(&mut conn, "kind = 'start'") == 1
    });
    assert_eq!(
        jobqueue_core::cancel(&mut conn, id).expect("cancel"),
        CancelOutcome::Requested
    );
    wait_status(&mut conn, id, JobStatus::Cancelled);
    runner.shutdown();
    assert_eq!(
        effects_where(&mut conn, "kind = 'saw-cancel'"),
        1,
        "the handler saw the request"
    );
}

/// A type the test registry does not have.
#[derive(serde::Serialize, serde::Deserialize)]
struct Stranger {}

impl Job for Stranger {
    const JOB_TYPE: &'static str = "nobody.handles.this";
}

impl jobqueue_runner::Perform for Stranger {
    fn perform(
        &self,
        ctx: &mut jobqueue_runner::JobContext<'_>,
    ) -> Result<(), jobqueue_runner::JobError> {
        jobs::record(ctx, "stranger")
    }
}

#[test]
fn an_unknown_job_type_is_set_aside_until_a_runner_handles_it() {
    let (db, mut conn) = setup();
    let stranger = Stranger {}.enqueue(&mut conn).expect("enqueue").id();
    let known = Noop { n: 1 }.enqueue(&mut conn).expect("enqueue").id();
    let runner = start_runner(config(&db, 2), jobs::registry());
    wait_status(&mut conn, known, JobStatus::Completed);
    wait_status(&mut conn, stranger, JobStatus::Unhandled);
    let stats = runner.shutdown().stats;
    assert_eq!(stats.unhandled, 1);
    let row = read_job(&mut conn, stranger);
    assert_eq!(row.attempts, 0, "setting a job aside uses up no attempt");
    let error = row.last_error.expect("the reason is on the row");
    assert_contains(
        &error,
        &[
            "no handler for job type nobody.handles.this",
            "queue default",
        ],
    );
    let types = jobqueue_core::type_stats(&mut conn).expect("stats");
    assert_eq!(types.len(), 1);
    assert_eq!(types[0].job_type, "nobody.handles.this");
    assert_eq!(types[0].counts.get(&JobStatus::Unhandled), Some(&1));

    // A runner that handles the type takes it back when it starts.
    let runner = start_runner(config(&db, 2), jobs::registry().register::<Stranger>());
    wait_completed(&mut conn, stranger, Duration::from_secs(10));
    runner.shutdown();
    assert_eq!(effects_where(&mut conn, "kind = 'stranger'"), 1);
    let row = read_job(&mut conn, stranger);
    assert_eq!(row.attempts, 1);
}

#[test]
fn a_handler_transaction_writes_its_effect_and_completion_together() {
    let (db, mut conn) = setup();
    let ids: Vec<_> = (0..20)
        .map(|_| {
            Effect { pause: false }
                .enqueue(&mut conn)
                .expect("enqueue")
                .id()
        })
        .collect();
    let runner = start_runner(config(&db, 4), jobs::registry());
    wait_count(&mut conn, "status = 'completed'", 20);
    let summary = runner.shutdown();
    assert_eq!(summary.stats.completed, 20);
    assert_eq!(effects_where(&mut conn, "kind = 'effect'"), 20);
    for id in ids {
        assert_eq!(effects_where(&mut conn, &format!("job_id = '{id}'")), 1);
    }
}

#[test]
fn a_busy_runner_hands_back_prefetched_jobs_another_runner_can_start() {
    let (db, mut conn) = setup();
    // Runner A, one worker, learns that jobs are short (no-ops): its
    // prefetch grows to a whole batch.
    enqueue_all(&mut conn, (0..3000).map(|_| BenchNoop { seq: 0 }));
    let mut config_a = config(&db, 1);
    config_a.worker_id = "runner-a".into();
    let registry = jobs::registry().register::<BenchNoop>();
    let a = start_runner(config_a, registry);
    wait_count(&mut conn, "status = 'completed'", 3000);
    // Then long jobs arrive: A claims many at once, but can start one at a time.
    enqueue_all(&mut conn, (0..12).map(|_| Sleep { ms: 700 }));
    let mut config_b = config(&db, 6);
    config_b.worker_id = "runner-b".into();
    let b = start_runner(config_b, jobs::registry());
    wait_count(
        &mut conn,
        "job_type = 'test.sleep' AND status = 'completed'",
        12,
    );
    a.shutdown();
    b.shutdown();
    let by_b = count_where(
        &mut conn,
        "job_type = 'test.sleep' AND worker_id = 'runner-b'",
    );
    assert!(
        by_b >= 6,
        "runner B ran only {by_b} of the 12 long jobs: A hoarded them"
    );
    assert_eq!(
        count_where(&mut conn, "job_type = 'test.sleep' AND attempts <> 1"),
        0,
        "handed-back jobs keep their attempt"
    );
    assert_eq!(
        effects_where(&mut conn, "kind = 'done'"),
        12,
        "each long job ran once"
    );
}

#[test]
fn dropping_the_handle_shuts_the_runner_down() {
    let (db, mut conn) = setup();
    let id = Noop { n: 1 }.enqueue(&mut conn).expect("enqueue").id();
    let runner = start_runner(config(&db, 4), jobs::registry());
    wait_completed(&mut conn, id, Duration::from_secs(30));
    assert!(other_sessions(&mut conn) > 0, "the runner is connected");
    drop(runner);
    // Every thread has stopped and closed its connection.
    wait_for(
        "the runner's connections closed",
        Duration::from_secs(30),
        || other_sessions(&mut conn) == 0,
    );
}

#[test]
fn a_runner_refuses_to_start_on_a_database_without_the_schema() {
    let db = TestDb::unmigrated();
    let started = Runner::new(RunnerConfig::new(&db.url), jobs::registry()).start();
    match started {
        Err(e @ jobqueue_runner::RunnerError::Schema(_)) => {
            let said = e.to_string();
            assert!(said.contains("run `jobqueue migrate`"), "{said}");
            assert!(
                said.contains(&format!(
                    "{} migration(s) pending",
                    jobqueue_tests::migration_count()
                )),
                "{said}"
            );
        }
        Err(other) => panic!("refused for another reason: {other}"),
        Ok(handle) => {
            handle.shutdown();
            panic!("started on a database without the schema");
        }
    }
    // Migrated, it starts.
    jobqueue_core::run_migrations(&mut db.conn()).expect("migrate");
    start_runner(RunnerConfig::new(&db.url), jobs::registry()).shutdown();
}
