//! The fetcher's claims of a backlog: two batches under way at once on the
//! runner's two claim connections while its queues have no global or rate
//! limit, and one at a time while they have (a second claim would wait for
//! the first's lock on the queue's row, then step over what it took).

use jobqueue_core::GlobalLimit;
use jobqueue_runner::{RunnerConfig, RunnerStats};
use jobqueue_tests::{TestDb, WAIT_LIMIT, count_where, enqueue_all, start_runner, wait_for};
use jobqueue_tools::bench::{BenchNoop, registry};

/// Burns down `jobs` no-op jobs with 8 workers; the runner's counts. The
/// prefetch is set, not grown from the jobs' times (which a loaded machine
/// stretches), to room for ten batches: a claim of a batch always finds
/// room for another beside it.
fn burn_down(db: &TestDb, conn: &mut diesel::PgConnection, jobs: usize) -> RunnerStats {
    enqueue_all(conn, (0..jobs).map(|_| BenchNoop { seq: 0 }));
    let mut config = RunnerConfig::new(&db.url).concurrency(8);
    config.batch_size = 200;
    config.prefetch = Some(2000);
    let runner = start_runner(config, registry());
    // The completer counts a flush once it is written: the rows go first.
    wait_for("every job done and counted", WAIT_LIMIT, || {
        count_where(conn, "true") == 0 && runner.stats().completed == jobs as u64
    });
    let stats = runner.stats();
    runner.shutdown();
    stats
}

#[test]
fn a_backlog_is_claimed_two_batches_at_once() {
    let (db, mut conn) = TestDb::connected();
    let stats = burn_down(&db, &mut conn, 20_000);
    assert_eq!(stats.completed, 20_000);
    assert!(
        stats.overlapped_claims > 0,
        "no claim was sent while another was under way: {stats:?}"
    );
}

#[test]
fn a_queue_with_a_limit_is_claimed_one_batch_at_a_time() {
    let (db, mut conn) = TestDb::connected();
    let limit = GlobalLimit::new(1_000_000).expect("a limit");
    jobqueue_core::set_queue_limit(&mut conn, "default", Some(limit)).expect("set the limit");
    let stats = burn_down(&db, &mut conn, 20_000);
    assert_eq!(stats.completed, 20_000);
    assert_eq!(stats.overlapped_claims, 0, "{stats:?}");
}
