//! Completed jobs kept for no time (`Retention::completed` of zero): the
//! completion deletes the row, fenced like an ordinary completion, inside
//! the handler's transaction for exactly-once jobs; failed jobs stay.

use std::time::Duration;

use jobqueue_core::Retention;
use jobqueue_runner::{Runner, RunnerConfig};
use jobqueue_tests::jobs::{Chaos, Noop};
use jobqueue_tests::{
    TestDb, claim_one, count_where, effects_where, enqueue_all, put, scalar, wait_for,
};

#[test]
fn a_runner_that_keeps_no_completed_jobs_deletes_them_as_it_completes_them() {
    let (db, mut conn) = TestDb::with_side_tables();
    enqueue_all(&mut conn, Chaos::mix(200, 0));
    enqueue_all(&mut conn, (0..100).map(|n| Noop { n }));
    let mut config = RunnerConfig::new(&db.url).concurrency(4);
    config.retention = Retention {
        completed: Some(Duration::ZERO),
        ..Retention::default()
    };
    let runner = Runner::new(config, jobqueue_tests::jobs::registry())
        .start()
        .expect("start");
    wait_for("every job done and gone", Duration::from_secs(60), || {
        count_where(&mut conn, "true") == 0
    });
    let summary = runner.shutdown();
    assert_eq!(summary.stats.completed, 300);
    // Exactly-once jobs (every other Chaos job) wrote their effect once:
    // the delete committed with it.
    assert_eq!(effects_where(&mut conn, "kind = 'effect'"), 100);
    assert_eq!(
        scalar(
            &mut conn,
            "SELECT count(*) AS n FROM (SELECT job_id FROM test_effects
             WHERE kind = 'effect' GROUP BY job_id HAVING count(*) > 1) AS twice"
        ),
        0
    );
}

#[test]
fn deleting_completions_are_fenced() {
    let db = TestDb::new();
    let mut conn = db.conn();
    put(&mut conn, "test.anything", jobqueue_core::JobOptions::new());
    let stale = claim_one(&mut conn, "a");
    // The lease lapses and another worker claims the job again.
    jobqueue_tests::expire_leases(&mut conn);
    jobqueue_core::rescue_stale(&mut conn, 100).expect("rescue");
    let current = claim_one(&mut conn, "b");
    assert_ne!(stale.token, current.token);
    let refused = jobqueue_core::complete_and_delete_many(&mut conn, &[stale]).expect("run");
    assert_eq!(refused.lost, vec![stale.job_id]);
    assert_eq!(
        count_where(&mut conn, "true"),
        1,
        "the stale completion deleted nothing"
    );
    jobqueue_core::complete_and_delete(&mut conn, &current).expect("the holder completes");
    assert_eq!(count_where(&mut conn, "true"), 0);
    // Once gone, a second completion finds nothing to complete.
    assert!(matches!(
        jobqueue_core::complete_and_delete(&mut conn, &current),
        Err(jobqueue_core::Error::LeaseLost { .. })
    ));
}
