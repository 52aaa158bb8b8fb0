//! Completed jobs kept for no time (`Retention::completed` of zero): the
//! completion deletes the row, fenced like an ordinary
//! completion, inside the handler's transaction for exactly-once jobs;
//! failed jobs stay. Every completion, kept or deleted, is counted per
//! minute, queue, type and connection, and maintenance folds and prunes
//! the counts.

use std::time::Duration;

use jobqueue_core::{JobOptions, Retention};
use jobqueue_runner::RunnerConfig;
use jobqueue_tests::jobs::{Chaos, Noop};
use jobqueue_tests::{
    TestDb, claim_one, count_where, effects_where, enqueue_all, put, scalar, start_runner,
    wait_count,
};

/// Completions counted for `queue` and `job_type`, in all.
fn counted(conn: &mut diesel::PgConnection, queue: &str, job_type: &str) -> i64 {
    scalar(
        conn,
        &format!(
            "SELECT coalesce(sum(completed), 0)::int8 AS n FROM jobqueue_completions
             WHERE queue = '{queue}' AND job_type = '{job_type}'"
        ),
    )
}

#[test]
fn by_default_a_runner_deletes_completed_jobs_as_it_completes_them_and_counts_them() {
    let (db, mut conn) = TestDb::with_side_tables();
    enqueue_all(&mut conn, Chaos::mix(200, 0));
    enqueue_all(&mut conn, (0..100).map(|n| Noop { n }));
    // No retention set: the default keeps no completed rows.
    let config = RunnerConfig::new(&db.url).concurrency(4);
    assert!(config.retention.deletes_completed());
    let runner = start_runner(config, jobqueue_tests::jobs::registry());
    wait_count(&mut conn, "true", 0);
    let summary = runner.shutdown();
    assert_eq!(summary.stats.completed, 300);
    // Counted by their own statements, the batch completions and the
    // exactly-once ones inside their handlers' transactions alike.
    assert_eq!(counted(&mut conn, "default", "test.chaos"), 200);
    assert_eq!(counted(&mut conn, "default", "test.noop"), 100);
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
    let (_db, mut conn) = TestDb::connected();
    put(&mut conn, "test.anything", jobqueue_core::JobOptions::new());
    let stale = claim_one(&mut conn, "a");
    // The lease lapses and another worker claims the job again.
    jobqueue_tests::expire_leases(&mut conn);
    jobqueue_core::engine::rescue_stale(&mut conn, 100).expect("rescue");
    let current = claim_one(&mut conn, "b");
    assert_ne!(stale.token, current.token);
    let refused =
        jobqueue_core::engine::complete_and_delete_many(&mut conn, &[stale]).expect("run");
    assert_eq!(refused.lost, vec![stale.job_id]);
    assert_eq!(
        count_where(&mut conn, "true"),
        1,
        "the stale completion deleted nothing"
    );
    jobqueue_core::engine::complete_and_delete(&mut conn, &current).expect("the holder completes");
    assert_eq!(count_where(&mut conn, "true"), 0);
    // Once gone, a second completion finds nothing to complete.
    assert!(matches!(
        jobqueue_core::engine::complete_and_delete(&mut conn, &current),
        Err(jobqueue_core::Error::LeaseLost { .. })
    ));
}

#[test]
fn a_runner_that_keeps_completed_jobs_keeps_their_rows_and_counts_them_too() {
    let (db, mut conn) = TestDb::with_side_tables();
    enqueue_all(&mut conn, (0..50).map(|n| Noop { n }));
    let config = RunnerConfig::new(&db.url)
        .concurrency(2)
        .keep_completed(Duration::from_secs(3600));
    let runner = start_runner(config, jobqueue_tests::jobs::registry());
    wait_count(&mut conn, "status = 'completed'", 50);
    runner.shutdown();
    assert_eq!(counted(&mut conn, "default", "test.noop"), 50);
    // The dashboard's chart: this minute's completions, from the counts.
    let (minutes, capped) = jobqueue_core::browse::throughput(&mut conn).expect("throughput");
    assert!(!capped);
    assert_eq!(minutes.iter().map(|m| m.completed).sum::<i64>(), 50);
}

#[test]
fn each_connection_counts_into_its_own_rows_and_maintenance_folds_and_prunes_them() {
    let db = TestDb::new();
    let mut a = db.conn();
    let mut b = db.conn();
    for _ in 0..3 {
        put(&mut a, "test.count", JobOptions::new().queue("q"));
    }
    // Two connections complete in transactions open at once: neither waits
    // for the other's count (each has a row of its own).
    diesel::RunQueryDsl::execute(diesel::sql_query("SET lock_timeout = '5s'"), &mut b)
        .expect("set lock_timeout");
    let first = claim_one(&mut a, "a");
    let second = claim_one(&mut b, "b");
    let third = claim_one(&mut b, "b");
    diesel::Connection::transaction::<_, jobqueue_core::Error, _>(&mut a, |a| {
        jobqueue_core::engine::complete_and_delete(a, &first)?;
        diesel::Connection::transaction::<_, jobqueue_core::Error, _>(&mut b, |b| {
            jobqueue_core::engine::complete_and_delete_many(b, &[second, third])?;
            Ok(())
        })
    })
    .expect("both complete");
    assert_eq!(counted(&mut a, "q", "test.count"), 3);
    assert_eq!(
        scalar(&mut a, "SELECT count(*) AS n FROM jobqueue_completions"),
        2,
        "one row per connection"
    );
    // Two hours later, the minute is folded into one row; counts older than
    // they are kept are deleted.
    for statement in [
        "UPDATE jobqueue_completions SET minute = minute - interval '2 hours'",
        "INSERT INTO jobqueue_completions VALUES
             (now() - interval '31 days', 'q', 'test.count', 7, 5)",
    ] {
        diesel::RunQueryDsl::execute(diesel::sql_query(statement), &mut a).expect("age the counts");
    }
    jobqueue_core::engine::prune(&mut a, &Retention::default()).expect("prune");
    assert_eq!(
        scalar(
            &mut a,
            "SELECT count(*) AS n FROM jobqueue_completions WHERE backend = 0"
        ),
        1
    );
    assert_eq!(
        scalar(&mut a, "SELECT count(*) AS n FROM jobqueue_completions"),
        1
    );
    assert_eq!(counted(&mut a, "q", "test.count"), 3);
}
