//! A runner's maintenance runs each of its tasks on its own timer: with
//! recovery and pruning a minute away, the vacuum still runs every 100 ms
//! once enough dead row versions have piled up.

use std::time::Duration;

use jobqueue_runner::{Runner, RunnerConfig};
use jobqueue_tests::{TestDb, count_where, enqueue_all, scalar, wait_for};
use jobqueue_tools::bench::{BenchNoop, registry};

#[test]
fn the_vacuum_runs_on_its_own_timer() {
    let db = TestDb::new();
    let mut conn = db.conn();
    enqueue_all(&mut conn, (0..300).map(|_| BenchNoop { seq: 0 }));
    let mut config = RunnerConfig::new(&db.url).keep_completed(jobqueue_tests::KEEP_COMPLETED);
    config.rescue_interval = Duration::from_secs(60);
    config.prune_interval = Duration::from_secs(60);
    config.vacuum_interval = Duration::from_millis(100);
    config.vacuum_min_dead = 50;
    let runner = Runner::new(config, registry()).start().expect("start");
    wait_for("the jobs done", Duration::from_secs(30), || {
        count_where(&mut conn, "status = 'completed'") == 300
    });
    // Dead row versions reach the statistics when the runner's sessions
    // report them (within about 10 s of going idle).
    wait_for(
        "the runner to vacuum the jobs table",
        Duration::from_secs(40),
        || {
            scalar(
                &mut conn,
                "SELECT count(*) AS n FROM pg_stat_user_tables
             WHERE relname = 'jobqueue_jobs' AND last_vacuum IS NOT NULL",
            ) == 1
        },
    );
    runner.shutdown();
}

/// While a transaction pins the xmin horizon, vacuums remove nothing, and
/// the runner vacuums less and less often instead of every interval; once
/// the transaction ends, the next vacuum reclaims the dead versions.
#[test]
fn the_vacuum_backs_off_while_the_horizon_is_pinned() {
    use diesel::RunQueryDsl as _;
    let db = TestDb::new();
    let mut conn = db.conn();
    let mut pin = db.conn();
    diesel::sql_query("BEGIN ISOLATION LEVEL REPEATABLE READ")
        .execute(&mut pin)
        .expect("begin");
    scalar(&mut pin, "SELECT count(*) AS n FROM jobqueue_jobs");
    enqueue_all(&mut conn, (0..300).map(|_| BenchNoop { seq: 0 }));
    let mut config = RunnerConfig::new(&db.url).keep_completed(jobqueue_tests::KEEP_COMPLETED);
    config.vacuum_interval = Duration::from_millis(100);
    config.vacuum_min_dead = 50;
    let runner = Runner::new(config, registry()).start().expect("start");
    wait_for("the jobs done", Duration::from_secs(30), || {
        count_where(&mut conn, "status = 'completed'") == 300
    });
    let vacuums = |conn: &mut diesel::PgConnection| {
        scalar(
            conn,
            "SELECT vacuum_count AS n FROM pg_stat_user_tables WHERE relname = 'jobqueue_jobs'",
        )
    };
    // The first vacuum comes once the dead versions reach the statistics.
    wait_for("a first vacuum", Duration::from_secs(40), || {
        vacuums(&mut conn) >= 1
    });
    let first = vacuums(&mut conn);
    // The scenario itself: the vacuums of a 4-s window while the horizon
    // stays pinned (a rate, so a fixed window; no condition ends it).
    std::thread::sleep(Duration::from_secs(4));
    let in_4_s = vacuums(&mut conn) - first;
    // Every 100 ms would be about 40; backing off from 200 ms, at most 4.
    assert!(
        in_4_s <= 6,
        "{in_4_s} vacuums in 4 s while the horizon was pinned"
    );
    diesel::sql_query("COMMIT")
        .execute(&mut pin)
        .expect("commit");
    wait_for(
        "a vacuum to reclaim the dead versions",
        Duration::from_secs(30),
        || {
            scalar(
                &mut conn,
                "SELECT n_dead_tup AS n FROM pg_stat_user_tables WHERE relname = 'jobqueue_jobs'",
            ) < 50
        },
    );
    runner.shutdown();
}
