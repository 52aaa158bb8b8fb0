//! The testing kit's `perform`: one handler on its own, without a runner
//! and, but for the last test, without a database.

use std::sync::atomic::Ordering;
use std::time::Duration;

use diesel::prelude::*;
use jobqueue_core::RetryPolicy;
use jobqueue_runner::Registry;
use jobqueue_testing::{Outcome, perform};
use jobqueue_tests::TestDb;
use jobqueue_tests::kit_jobs::{self, Act, Counter, Orphan, registry};

#[test]
fn each_outcome_of_a_handler_on_its_own() {
    let counter = Counter::default();
    let registry = registry(&counter);
    let run = |act: &Act| perform(&registry, act).run().expect("performed");
    assert_eq!(run(&Act::Complete).outcome, Outcome::Completed);
    // The type's own backoff: 1 s doubling to 60 s.
    let policy = RetryPolicy {
        base: Duration::from_secs(1),
        max: Duration::from_secs(60),
        ..RetryPolicy::DEFAULT
    };
    assert_eq!(
        run(&Act::Retry).outcome,
        Outcome::Retried {
            error: "try again".into(),
            policy
        }
    );
    assert_eq!(
        run(&Act::Permanent).outcome,
        Outcome::Failed {
            error: "never".into()
        }
    );
    assert_eq!(
        run(&Act::Snooze).outcome,
        Outcome::Snoozed(Duration::from_secs(30))
    );
    assert_eq!(run(&Act::Cancel).outcome, Outcome::Cancelled);
    let panicked = run(&Act::Panic);
    assert!(panicked.panicked);
    assert!(
        matches!(&panicked.outcome, Outcome::Retried { error, .. } if error.ends_with("panicked: the handler blew up")),
        "{panicked:?}"
    );
    let progress = run(&Act::Progress);
    assert_eq!(progress.outcome, Outcome::Completed);
    assert_eq!(progress.reports.len(), 3, "{progress:?}");
    let unwritten = progress.unwritten.expect("the latest progress, to write");
    assert_eq!(
        (
            unwritten.percent,
            unwritten.stage.as_deref(),
            unwritten.events
        ),
        (Some(90), Some("upload"), 2)
    );
    assert_eq!(run(&Act::Count).outcome, Outcome::Completed);
    assert_eq!(counter.0.load(Ordering::Relaxed), 1, "the registry's state");
}

#[test]
fn a_workflow_step_reads_the_parents_results_it_is_given_and_records_its_own() {
    let counter = Counter::default();
    let registry = registry(&counter);
    let step = Act::Sum { n: 5 };
    let done = perform(&registry, &step)
        .parent_result("base", &10)
        .parent_without_result("thumbnails")
        .run()
        .expect("performed");
    assert_eq!(done.outcome, Outcome::Completed);
    // 5 + 10 + two parents.
    assert_eq!(done.result.as_deref(), Some("17"));
    // A name it does not come after fails it for good, naming its parents.
    let done = perform(&registry, &step)
        .parent_result("other", &1)
        .run()
        .expect("performed");
    match &done.outcome {
        Outcome::Failed { error } => {
            assert!(
                error.contains("no parent step is named `base`") && error.contains("[other]"),
                "{error}"
            );
        }
        other => panic!("{other:?}"),
    }
    // A result of the wrong shape, likewise.
    let done = perform(&registry, &step)
        .parent_result("base", "ten")
        .run()
        .expect("performed");
    assert!(
        matches!(&done.outcome, Outcome::Failed { error } if error.contains("does not decode")),
        "{:?}",
        done.outcome
    );
    // Outside a workflow, as a runner would see it: no parents.
    let alone = perform(&registry, &step).run().expect("performed");
    assert!(
        matches!(&alone.outcome, Outcome::Failed { error } if error.contains("comes after []")),
        "{:?}",
        alone.outcome
    );
}

#[test]
fn attempt_cancel_and_shutdown_are_what_the_handler_sees() {
    let counter = Counter::default();
    let registry = registry(&counter);
    let second = perform(&registry, &Act::SucceedOnAttempt(3))
        .attempt(2)
        .run()
        .expect("performed");
    assert!(
        matches!(&second.outcome, Outcome::Retried { error, .. } if error == "attempt 2"),
        "{second:?}"
    );
    let third = perform(&registry, &Act::SucceedOnAttempt(3))
        .attempt(3)
        .run()
        .expect("performed");
    assert_eq!(third.outcome, Outcome::Completed);
    let stopping = perform(&registry, &Act::Shutdown)
        .shutting_down()
        .run()
        .expect("performed");
    assert!(
        matches!(&stopping.outcome, Outcome::Retried { error, .. } if error == "shutting down"),
        "{stopping:?}"
    );
    let not_stopping = perform(&registry, &Act::Shutdown).run().expect("performed");
    assert_eq!(not_stopping.outcome, Outcome::Completed);
    let watching = perform(&registry, &Act::WatchCancel)
        .run()
        .expect("performed");
    assert_eq!(watching.outcome, Outcome::Completed);
    let config = jobqueue_runner::RunnerConfig::new("unused");
    let cancelled = perform(&registry, &Act::WatchCancel)
        .cancel_requested()
        .config(&config)
        .run()
        .expect("performed");
    assert_eq!(cancelled.outcome, Outcome::Cancelled);
}

#[test]
fn without_a_connection_a_handler_that_needs_one_is_told_so_and_unknown_types_are_unhandled() {
    let counter = Counter::default();
    let registry = registry(&counter);
    let spawn = perform(&registry, &Act::Spawn { left: 1 })
        .run()
        .expect("performed");
    assert!(
        matches!(&spawn.outcome, Outcome::Retried { error, .. } if error.starts_with("no database connection")),
        "{spawn:?}"
    );
    let orphan = perform(&registry, &Orphan {}).run().expect("performed");
    assert_eq!(orphan.outcome, Outcome::Unhandled);
    let empty = Registry::new();
    assert_eq!(
        perform(&empty, &Act::Complete)
            .run()
            .expect("performed")
            .outcome,
        Outcome::Unhandled
    );
}

#[test]
fn with_the_tests_connection_a_handler_writes_inside_its_transaction() {
    let (_db, mut conn) = TestDb::connected();
    conn.begin_test_transaction()
        .expect("begin the test transaction");
    kit_jobs::create_notes(&mut conn);
    let counter = Counter::default();
    let registry = registry(&counter);
    let written = perform(
        &registry,
        &Act::Write {
            note: "in the test".into(),
        },
    )
    .conn(&mut conn)
    .run()
    .expect("performed");
    assert_eq!(written.outcome, Outcome::CompletedInTransaction);
    let bad = perform(&registry, &Act::BadStatement)
        .conn(&mut conn)
        .run()
        .expect("performed");
    assert!(bad.rolled_back, "{bad:?}");
    assert_eq!(kit_jobs::notes(&mut conn), ["in the test"]);
    let spawned = perform(&registry, &Act::Spawn { left: 1 })
        .conn(&mut conn)
        .run()
        .expect("performed");
    assert_eq!(spawned.outcome, Outcome::Completed);
    jobqueue_testing::assert_enqueued::<Act>(&mut conn, |act| *act == Act::Spawn { left: 0 });
}
