//! Durable steps inside one job (`JobContext::step`): a retry replays the
//! steps an earlier attempt finished instead of running them again; a
//! step renamed since it was recorded fails the job naming both; a step
//! whose lease was lost rolls back its writes with its record; the record
//! is fenced and taken in turn; and under `kill -9` of the runners every
//! step's write through its connection happens exactly once, and every
//! job completes. The same for a durable cursor (`JobContext::advance_with`):
//! a retry resumes where the last attempt's cursor got to, the cursor is
//! fenced and bounded, one of another type fails the job, and under
//! `kill -9` every write it covers happens once.

use std::time::Duration;

use chrono::{TimeDelta, Utc};
use jobqueue_core::engine::{
    MAX_CURSOR_BYTES, MAX_STEP_OUTPUT_BYTES, record_cursor, record_step, recorded_step,
};
use jobqueue_core::{Error, Job};
use jobqueue_runner::RunnerConfig;
use jobqueue_testing::{Drain, Ended};
use jobqueue_tests::fault::{Proc, kill_and_replace, runner_command, runner_flags, terminate_all};
use jobqueue_tests::jobs::{Cursored, Stepped, registry};
use jobqueue_tests::{
    TestDb, claim_one, count_where, effects_where, enqueue_all, exec, expire_leases, read_job,
    scalar, start_runner, wait_for, wait_no_live_jobs,
};

const WORKER: &str = env!("CARGO_BIN_EXE_jobqueue-test-worker");

/// `(job, step)` pairs whose effect was written other than once, and the
/// pairs written at all.
fn effects_off(conn: &mut diesel::PgConnection) -> (i64, i64) {
    let off = scalar(
        conn,
        "SELECT count(*) AS n FROM (SELECT job_id, kind FROM test_effects
                                    GROUP BY job_id, kind HAVING count(*) <> 1) AS t",
    );
    let pairs = scalar(
        conn,
        "SELECT count(*) AS n FROM (SELECT DISTINCT job_id, kind FROM test_effects) AS t",
    );
    (off, pairs)
}

/// Enqueues `job` and drains it ten minutes on (past its retry's
/// backoff): its first attempt is retried and its second completes.
fn retried_then_completed(conn: &mut diesel::PgConnection, job: impl Job) {
    job.enqueue(conn).expect("enqueue");
    let registry = registry();
    let drained = Drain::new(&registry)
        .as_of(Utc::now() + TimeDelta::minutes(10))
        .recursive(3)
        .run(conn)
        .expect("drain");
    let ended: Vec<&Ended> = drained.jobs.iter().map(|job| &job.ended).collect();
    assert!(
        matches!(ended[..], [Ended::Retried { .. }, Ended::Completed]),
        "{drained}"
    );
}

#[test]
fn a_retry_replays_the_steps_an_earlier_attempt_finished() {
    let (_db, mut conn) = TestDb::with_side_tables();
    retried_then_completed(
        &mut conn,
        Stepped {
            steps: 4,
            ms: 0,
            fail_first_at: Some(2),
        },
    );
    // Steps 0 and 1 ran in the first attempt only; step 2's first write
    // rolled back with its failure; 2 and 3 ran in the second.
    for (step, attempt) in [(0, 1), (1, 1), (2, 2), (3, 2)] {
        assert_eq!(
            effects_where(&mut conn, &format!("kind = 'step-{step}'")),
            1,
            "step {step}"
        );
        assert_eq!(
            effects_where(
                &mut conn,
                &format!("kind = 'step-{step}' AND attempt = {attempt}")
            ),
            1,
            "step {step} ran in attempt {attempt}"
        );
    }
}

/// Drains the one job there is, which fails for good: its error.
fn failed_for_good(conn: &mut diesel::PgConnection) -> String {
    let registry = registry();
    let drained = Drain::new(&registry).run(conn).expect("drain");
    let [ref job] = drained.jobs[..] else {
        panic!("one job:\n{drained}");
    };
    let Ended::Failed { error } = &job.ended else {
        panic!("failed for good:\n{drained}");
    };
    error.clone()
}

#[test]
fn a_step_renamed_since_it_was_recorded_fails_the_job_naming_both() {
    let (_db, mut conn) = TestDb::with_side_tables();
    let id = Stepped {
        steps: 2,
        ms: 0,
        fail_first_at: None,
    }
    .enqueue(&mut conn)
    .expect("enqueue")
    .id();
    exec(
        &mut conn,
        r#"UPDATE jobqueue_jobs SET step_outputs = '[{"name": "charge", "output": 0}]'"#,
    );
    let error = failed_for_good(&mut conn);
    assert!(
        error.contains("step 1 is `step-0`") && error.contains("recorded as `charge`"),
        "{error}"
    );
    assert_eq!(effects_where(&mut conn, "true"), 0, "no step ran");
    assert_eq!(read_job(&mut conn, id).status.as_str(), "failed");
}

#[test]
fn a_step_is_recorded_once_in_its_turn_and_only_under_its_lease() {
    let (_db, mut conn) = TestDb::connected();
    Stepped {
        steps: 1,
        ms: 0,
        fail_first_at: None,
    }
    .enqueue(&mut conn)
    .expect("enqueue");
    let lease = claim_one(&mut conn, "w1");
    record_step(&mut conn, &lease, 0, "a", "10").expect("step 0");
    let again = record_step(&mut conn, &lease, 0, "a", "10").expect_err("recorded already");
    assert!(matches!(again, Error::LeaseLost { .. }), "{again}");
    let skipped = record_step(&mut conn, &lease, 2, "c", "30").expect_err("out of turn");
    assert!(matches!(skipped, Error::LeaseLost { .. }), "{skipped}");
    let big = format!("\"{}\"", "x".repeat(MAX_STEP_OUTPUT_BYTES));
    let refused = record_step(&mut conn, &lease, 1, "b", &big).expect_err("too big");
    assert!(refused.to_string().contains("step `b`"), "{refused}");
    // Another runner rescues and claims the job: the old lease records
    // nothing more.
    expire_leases(&mut conn);
    jobqueue_core::engine::rescue_stale(&mut conn, 100).expect("rescue");
    let newer = claim_one(&mut conn, "w2");
    assert!(newer.token > lease.token);
    let lost = record_step(&mut conn, &lease, 1, "b", "20").expect_err("lease lost");
    assert!(matches!(lost, Error::LeaseLost { .. }), "{lost}");
    record_step(&mut conn, &newer, 1, "b", "20").expect("the new holder's step");
    let row = read_job(&mut conn, lease.job_id);
    let steps: Vec<(String, serde_json::Value)> = (0..3)
        .filter_map(|i| recorded_step(&row, i))
        .map(|step| (step.name, step.output))
        .collect();
    assert_eq!(
        steps,
        [("a".to_owned(), 10.into()), ("b".to_owned(), 20.into())]
    );
}

#[test]
fn a_step_whose_lease_was_lost_rolls_back_its_writes_with_its_record() {
    let (db, mut conn) = TestDb::with_side_tables();
    let id = Stepped {
        steps: 1,
        ms: 1_500,
        fail_first_at: None,
    }
    .enqueue(&mut conn)
    .expect("enqueue")
    .id();
    let runner = start_runner(
        RunnerConfig::new(&db.url).lease(Duration::from_secs(2)),
        registry(),
    );
    wait_for("the step to start", Duration::from_secs(30), || {
        count_where(&mut conn, "status = 'running'") == 1
    });
    // Another claim took the job while its step ran (as a rescue after a
    // pause would): the step's record finds the lease gone.
    exec(
        &mut conn,
        "UPDATE jobqueue_jobs SET claim_count = claim_count + 1",
    );
    wait_no_live_jobs(&mut conn, Duration::from_secs(60));
    runner.shutdown();
    // The lost attempt's write rolled back; a later attempt's committed.
    assert_eq!(effects_where(&mut conn, "kind = 'step-0'"), 1);
    assert!(
        effects_where(&mut conn, &format!("job_id = '{id}' AND attempt > 1")) == 1,
        "the step ran again, once, after the lease was lost"
    );
}

#[test]
fn under_kill_9_every_steps_write_happens_once_and_every_job_completes() {
    under_kill_9("durable steps", |steps| Stepped {
        steps,
        ms: 60,
        fail_first_at: None,
    });
}

#[test]
fn under_kill_9_every_write_a_cursor_covers_happens_once_and_every_job_completes() {
    under_kill_9("a durable cursor", |items| Cursored {
        items,
        ms: 60,
        fail_first_at: None,
    });
}

/// 200 jobs of five writes each (`job(5)`), each write made with its
/// record (a step's output, a cursor's advance), worked by runners killed
/// with `kill -9` and replaced every half second or so: every job
/// completes, some write is made by a later attempt, and each write is
/// made exactly once.
fn under_kill_9<J: Job>(what: &str, job: impl Fn(u32) -> J) {
    const JOBS: usize = 200;
    const WRITES: u32 = 5;
    let (db, mut conn) = TestDb::with_side_tables();
    enqueue_all(&mut conn, (0..JOBS).map(|_| job(WRITES)));
    let mut started = 0;
    let mut start = || {
        started += 1;
        let name = format!("durable-{started}");
        let command = runner_command(
            WORKER,
            &db.url,
            &name,
            &runner_flags(&[("lease-secs", "2"), ("concurrency", "8")]),
        );
        Proc::spawn(&name, command)
    };
    let mut live: Vec<Proc> = (0..2).map(|_| start()).collect();
    wait_for("the first writes", Duration::from_secs(60), || {
        effects_where(&mut conn, "true") > 0
    });
    let kills = kill_and_replace(&mut live, &mut start, Duration::from_secs(6), || {
        count_where(&mut conn, "status <> 'completed'") > 0
    });
    wait_no_live_jobs(&mut conn, Duration::from_secs(180));
    terminate_all(&mut live);
    assert!(kills > 0);
    assert_eq!(
        jobqueue_tests::status_counts(&mut conn),
        [("completed", JOBS as i64)],
        "every job completed"
    );
    // A job a kill interrupted between two writes made its other writes
    // in a later attempt.
    let later = effects_where(&mut conn, "attempt > 1");
    eprintln!(
        "{what} under kill -9: {JOBS} jobs of {WRITES} writes, {kills} kills, \
         {later} writes made by a later attempt"
    );
    assert!(later > 0, "no kill hit a job mid-way ({kills} kills)");
    assert_eq!(
        effects_off(&mut conn),
        (0, (JOBS as i64) * i64::from(WRITES)),
        "(pairs written other than once, pairs written) after {kills} kills"
    );
}

#[test]
fn a_retry_resumes_at_the_cursor_an_earlier_attempt_advanced() {
    let (_db, mut conn) = TestDb::with_side_tables();
    retried_then_completed(
        &mut conn,
        Cursored {
            items: 5,
            ms: 0,
            fail_first_at: Some(3),
        },
    );
    // Items 0 to 2 were done in the first attempt; item 3's first write
    // rolled back with its failure, and the retry began at item 3.
    for (item, attempt) in [(0, 1), (1, 1), (2, 1), (3, 2), (4, 2)] {
        assert_eq!(
            effects_where(
                &mut conn,
                &format!("kind = 'item-{item}' AND attempt = {attempt}")
            ),
            1,
            "item {item} done in attempt {attempt}"
        );
    }
    assert_eq!(effects_where(&mut conn, "true"), 5, "each item once");
}

#[test]
fn a_cursor_is_replaced_only_under_its_lease_and_kept_small() {
    let (_db, mut conn) = TestDb::connected();
    let id = Cursored {
        items: 1,
        ms: 0,
        fail_first_at: None,
    }
    .enqueue(&mut conn)
    .expect("enqueue")
    .id();
    let lease = claim_one(&mut conn, "w1");
    record_cursor(&mut conn, &lease, "1").expect("advance");
    record_cursor(&mut conn, &lease, r#"{"after": "k-9"}"#).expect("advance again");
    let big = format!("\"{}\"", "x".repeat(MAX_CURSOR_BYTES));
    let refused = record_cursor(&mut conn, &lease, &big).expect_err("too big");
    assert!(refused.to_string().contains("cursor"), "{refused}");
    // Another runner rescues and claims the job: the old lease moves the
    // cursor no more, the new holder reads where it had got to.
    expire_leases(&mut conn);
    jobqueue_core::engine::rescue_stale(&mut conn, 100).expect("rescue");
    let newer = claim_one(&mut conn, "w2");
    assert_eq!(
        read_job(&mut conn, id).step_cursor,
        Some(serde_json::json!({"after": "k-9"}))
    );
    let lost = record_cursor(&mut conn, &lease, "2").expect_err("lease lost");
    assert!(matches!(lost, Error::LeaseLost { .. }), "{lost}");
    record_cursor(&mut conn, &newer, "3").expect("the new holder's advance");
    assert_eq!(read_job(&mut conn, id).step_cursor, Some(3.into()));
}

#[test]
fn a_cursor_that_no_longer_decodes_fails_the_job_naming_it() {
    let (_db, mut conn) = TestDb::with_side_tables();
    let id = Cursored {
        items: 2,
        ms: 0,
        fail_first_at: None,
    }
    .enqueue(&mut conn)
    .expect("enqueue")
    .id();
    exec(
        &mut conn,
        r#"UPDATE jobqueue_jobs SET step_cursor = '{"after": "k-9"}'"#,
    );
    let error = failed_for_good(&mut conn);
    assert!(
        error.contains(r#"durable cursor {"after":"k-9"} does not decode"#),
        "{error}"
    );
    assert_eq!(effects_where(&mut conn, "true"), 0, "no item was done");
    assert_eq!(read_job(&mut conn, id).status.as_str(), "failed");
}
