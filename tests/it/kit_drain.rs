//! The testing kit's drain: each kind of outcome written as a runner
//! writes it, retries with their errors and backoff, the jobs jobs enqueue
//! (and the bound on them), scheduled jobs as of a time, a bound on jobs,
//! one queue, the handler's connection inside the test's transaction.

use std::time::Duration;

use chrono::{TimeDelta, Utc};
use diesel::prelude::*;
use jobqueue_core::{Job, JobStatus};
use jobqueue_runner::RunnerConfig;
use jobqueue_runner::inline::Outcome;
use jobqueue_testing::{Drain, Ended, Stop, assert_enqueued, expect};
use jobqueue_tests::kit_jobs::{self, Act, Counter, Orphan, Welcome, registry};
use jobqueue_tests::{TestDb, read_job};

/// A fresh database, and a connection to it inside a test transaction.
fn in_test_transaction() -> (TestDb, PgConnection) {
    let (db, mut conn) = TestDb::connected();
    conn.begin_test_transaction()
        .expect("begin the test transaction");
    (db, conn)
}

#[test]
fn each_outcome_is_written_as_a_runner_writes_it() {
    let (_db, mut conn) = in_test_transaction();
    let acts = [
        Act::Complete,
        Act::Retry,
        Act::Permanent,
        Act::Snooze,
        Act::Cancel,
        Act::Panic,
    ];
    let ids: Vec<_> = acts
        .iter()
        .map(|act| act.enqueue(&mut conn).expect("enqueue").id())
        .collect();
    Orphan {}.enqueue(&mut conn).expect("enqueue");
    let counter = Counter::default();
    let drained = Drain::new(&registry(&counter))
        .run(&mut conn)
        .expect("drain");
    assert_eq!(drained.stop, Stop::Empty, "{drained}");
    assert_eq!(drained.jobs.len(), 7, "{drained}");
    let of = |id| {
        drained
            .jobs
            .iter()
            .find(|job| job.id == id)
            .unwrap_or_else(|| panic!("{id} was not worked:\n{drained}"))
    };

    let complete = of(ids[0]);
    assert_eq!(complete.outcome, Outcome::Completed);
    assert_eq!(complete.ended, Ended::Completed);
    assert_eq!((complete.attempt, complete.round), (1, 1));
    let Ended::Retried { error, due } = &of(ids[1]).ended else {
        panic!("a retry:\n{drained}");
    };
    assert_eq!(error, "try again");
    let retry = read_job(&mut conn, ids[1]);
    assert_eq!(retry.status, JobStatus::Scheduled);
    assert_eq!(retry.run_at, *due);
    let waited = *due - retry.created_at;
    assert!(
        (TimeDelta::milliseconds(800)..=TimeDelta::milliseconds(1200)).contains(&waited),
        "the type's backoff, 1 s ± 20 %: {waited}"
    );
    assert_eq!(retry.errors.as_array().map(Vec::len), Some(1), "{retry:?}");
    assert_eq!(
        of(ids[2]).ended,
        Ended::Failed {
            error: "never".into()
        }
    );
    assert!(
        matches!(of(ids[3]).outcome, Outcome::Snoozed(delay) if delay == Duration::from_secs(30))
    );
    let Ended::Snoozed { due } = of(ids[3]).ended else {
        panic!("a snooze:\n{drained}");
    };
    let snoozed = read_job(&mut conn, ids[3]);
    assert_eq!(
        (snoozed.attempts, snoozed.snoozes),
        (0, 1),
        "no attempt used"
    );
    assert_eq!(due - snoozed.created_at, TimeDelta::seconds(30));
    assert_eq!(of(ids[4]).ended, Ended::Cancelled);
    let Ended::Retried { error, .. } = &of(ids[5]).ended else {
        panic!("a panic is a retry:\n{drained}");
    };
    assert_eq!(
        error,
        "handler for job type `kit.act` panicked: the handler blew up"
    );
    let orphan = drained
        .jobs
        .iter()
        .find(|job| job.is::<Orphan>())
        .expect("the orphan");
    assert_eq!(
        (&orphan.outcome, &orphan.ended),
        (&Outcome::Unhandled, &Ended::Unhandled)
    );
    // Completed jobs are deleted, as a runner's default retention says.
    assert!(
        jobqueue_core::get_job(&mut conn, ids[0])
            .expect("read")
            .found()
            .is_none()
    );
}

#[test]
fn retries_run_again_as_of_a_later_time_until_they_succeed_or_fail_for_good() {
    let (_db, mut conn) = in_test_transaction();
    let flaky = Act::SucceedOnAttempt(3)
        .enqueue(&mut conn)
        .expect("enqueue")
        .id();
    let doomed = Act::Retry.enqueue(&mut conn).expect("enqueue").id();
    let counter = Counter::default();
    let registry = registry(&counter);
    // Now: one attempt each; their retries are due a second on.
    let now = Drain::new(&registry)
        .recursive(10)
        .run(&mut conn)
        .expect("drain");
    assert_eq!(now.jobs.len(), 2, "{now}");
    assert_eq!(now.stop, Stop::Empty, "{now}");
    // A minute on: every retry is due, round after round.
    let later = Drain::new(&registry)
        .as_of(Utc::now() + TimeDelta::minutes(1))
        .recursive(10)
        .run(&mut conn)
        .expect("drain");
    assert_eq!(later.stop, Stop::Empty, "{later}");
    let ended = |id| -> Vec<&Ended> {
        later
            .jobs
            .iter()
            .filter(|job| job.id == id)
            .map(|job| &job.ended)
            .collect()
    };
    assert!(
        matches!(ended(flaky)[..], [Ended::Retried { .. }, Ended::Completed]),
        "{later}"
    );
    let doomed_ended = ended(doomed);
    let [Ended::Retried { error, due }, Ended::Failed { error: last }] = doomed_ended[..] else {
        panic!("a retry, then the dead letter:\n{later}");
    };
    assert_eq!((error.as_str(), last.as_str()), ("try again", "try again"));
    let waited = *due - read_job(&mut conn, doomed).created_at;
    assert!(
        (TimeDelta::milliseconds(1600)..=TimeDelta::milliseconds(2400)).contains(&waited),
        "the second retry's backoff, 2 s ± 20 %: {waited}"
    );
    let dead = read_job(&mut conn, doomed);
    assert_eq!((dead.status, dead.attempts), (JobStatus::Failed, 3));
    assert_eq!(dead.errors.as_array().map(Vec::len), Some(3), "{dead:?}");
    let attempts: Vec<i32> = later.jobs.iter().map(|job| job.attempt).collect();
    assert_eq!(attempts, [2, 2, 3, 3], "round by round: {later}");
}

#[test]
fn jobs_that_jobs_enqueue_run_in_later_rounds_up_to_the_bound() {
    let (_db, mut conn) = in_test_transaction();
    let counter = Counter::default();
    let registry = registry(&counter);
    Act::Spawn { left: 3 }.enqueue(&mut conn).expect("enqueue");
    let once = Drain::new(&registry).run(&mut conn).expect("drain");
    assert_eq!((once.jobs.len(), once.stop), (1, Stop::Rounds), "{once}");
    assert_enqueued::<Act>(&mut conn, |act| *act == Act::Spawn { left: 2 });
    let all = Drain::new(&registry)
        .recursive(10)
        .run(&mut conn)
        .expect("drain");
    let rounds: Vec<usize> = all.jobs.iter().map(|job| job.round).collect();
    assert_eq!(rounds, [1, 2, 3], "{all}");
    assert_eq!(all.stop, Stop::Empty, "{all}");

    // A job that enqueues itself forever stops at the bound.
    Act::Again.enqueue(&mut conn).expect("enqueue");
    let bounded = Drain::new(&registry)
        .recursive(4)
        .run(&mut conn)
        .expect("drain");
    assert_eq!(
        (bounded.jobs.len(), bounded.stop),
        (4, Stop::Rounds),
        "{bounded}"
    );
    expect::<Act>()
        .matching(|act| *act == Act::Again)
        .assert_enqueued_once(&mut conn);
}

#[test]
fn scheduled_jobs_run_once_due_as_of_the_drains_time() {
    let (_db, mut conn) = in_test_transaction();
    let counter = Counter::default();
    let registry = registry(&counter);
    let start = Utc::now();
    Act::Count
        .options()
        .delay(Duration::from_secs(3600))
        .enqueue(&mut conn)
        .expect("enqueue");
    let now = Drain::new(&registry).run(&mut conn).expect("drain");
    assert_eq!((now.jobs.len(), now.stop), (0, Stop::Empty), "{now}");
    let too_soon = Drain::new(&registry)
        .as_of(start + TimeDelta::minutes(30))
        .run(&mut conn)
        .expect("drain");
    assert!(too_soon.jobs.is_empty(), "{too_soon}");
    expect::<Act>()
        .status(JobStatus::Scheduled)
        .assert_enqueued_once(&mut conn);
    let due = Drain::new(&registry)
        .as_of(start + TimeDelta::minutes(61))
        .run(&mut conn)
        .expect("drain");
    assert_eq!(due.count(|ended| *ended == Ended::Completed), 1, "{due}");
    assert_eq!(
        counter.0.load(std::sync::atomic::Ordering::Relaxed),
        1,
        "the handler reached the registry's state"
    );
}

#[test]
fn stop_after_and_queue_bound_what_is_worked() {
    let (_db, mut conn) = in_test_transaction();
    let counter = Counter::default();
    let registry = registry(&counter);
    for priority in [10, 30, 20] {
        Act::Complete
            .options()
            .priority(priority)
            .enqueue(&mut conn)
            .expect("enqueue");
    }
    Welcome {
        to: "ada@example.com".into(),
    }
    .enqueue(&mut conn)
    .expect("enqueue");
    let mail = Drain::new(&registry)
        .queue("mail")
        .run(&mut conn)
        .expect("drain");
    assert_eq!(mail.of_type::<Welcome>().len(), 1, "{mail}");
    assert_eq!((mail.jobs.len(), mail.stop), (1, Stop::Empty), "{mail}");
    let two = Drain::new(&registry)
        .stop_after(2)
        .run(&mut conn)
        .expect("drain");
    assert_eq!(two.stop, Stop::Jobs, "{two}");
    assert_eq!(two.jobs.len(), 2, "{two}");
    let left = expect::<Act>().assert_enqueued_once(&mut conn);
    assert_eq!(left.priority(), 10, "highest priority first: {two}");
    let rest = Drain::new(&registry)
        .stop_after(5)
        .run(&mut conn)
        .expect("drain");
    assert_eq!((rest.jobs.len(), rest.stop), (1, Stop::Empty), "{rest}");
}

#[test]
fn the_handlers_connection_is_the_tests_and_a_failed_statement_rolls_back_its_attempt() {
    let (_db, mut conn) = in_test_transaction();
    kit_jobs::create_notes(&mut conn);
    let counter = Counter::default();
    let registry = registry(&counter);
    let config = RunnerConfig::new("unused").keep_completed(Duration::from_secs(3600));
    let write = Act::Write {
        note: "written".into(),
    }
    .enqueue(&mut conn)
    .expect("enqueue")
    .id();
    Act::BadStatement.enqueue(&mut conn).expect("enqueue");
    Act::Progress.enqueue(&mut conn).expect("enqueue");
    let drained = Drain::new(&registry)
        .config(&config)
        .run(&mut conn)
        .expect("drain");
    let written = drained
        .jobs
        .iter()
        .find(|job| job.id == write)
        .expect("worked");
    assert_eq!(
        written.outcome,
        Outcome::CompletedInTransaction,
        "{drained}"
    );
    assert_eq!(written.ended, Ended::Completed);
    let bad = drained
        .jobs
        .iter()
        .find(|job| job.payload == serde_json::json!("BadStatement"))
        .expect("worked");
    assert!(bad.rolled_back, "{drained}");
    assert!(
        matches!(&bad.ended, Ended::Retried { error, .. } if error.contains("no_such_table")),
        "{drained}"
    );
    // The note of the completed job stays; the bad one's was rolled back,
    // and the test's transaction still takes statements.
    assert_eq!(kit_jobs::notes(&mut conn), ["written"]);
    let progress = drained
        .jobs
        .iter()
        .find(|job| job.payload == serde_json::json!("Progress"))
        .expect("worked");
    let stages: Vec<(Option<u8>, Option<&str>, u32)> = progress
        .reports
        .iter()
        .map(|r| (r.percent, r.stage.as_deref(), r.events))
        .collect();
    assert_eq!(
        stages,
        [
            (Some(10), Some("download"), 0),
            (None, None, 2),
            (Some(90), Some("upload"), 0)
        ]
    );
    // Kept completed (the configuration's retention), with its progress.
    let row = read_job(&mut conn, progress.id);
    assert_eq!(row.status, JobStatus::Completed);
    assert_eq!(
        (row.current_stage.as_deref(), row.events_count),
        (Some("upload"), 2)
    );
}

#[test]
fn jobs_set_aside_for_want_of_a_handler_are_taken_back_by_a_registry_that_has_one() {
    let (_db, mut conn) = in_test_transaction();
    let counter = Counter::default();
    Welcome {
        to: "ada@example.com".into(),
    }
    .enqueue(&mut conn)
    .expect("enqueue");
    let without = jobqueue_runner::Registry::new().register::<Act>();
    let set_aside = Drain::new(&without).run(&mut conn).expect("drain");
    assert_eq!(set_aside.jobs[0].ended, Ended::Unhandled, "{set_aside}");
    expect::<Welcome>()
        .status(JobStatus::Unhandled)
        .assert_enqueued_once(&mut conn);
    let taken_back = Drain::new(&registry(&counter))
        .run(&mut conn)
        .expect("drain");
    assert_eq!(taken_back.jobs[0].ended, Ended::Completed, "{taken_back}");
    assert_eq!(
        taken_back.jobs[0].attempt, 1,
        "setting aside used no attempt"
    );
}
