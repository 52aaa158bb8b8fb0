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

/// A vacuum shortens the jobs table by its empty end only when asked
/// (the runners ask at most every five minutes): autovacuum and the
/// ordinary maintenance vacuum leave the pages for new rows, since taking
/// them away locks out every claim.
#[test]
fn a_vacuum_shortens_the_table_only_when_asked_to() {
    let db = TestDb::new();
    let mut conn = db.conn();
    let size = |conn: &mut diesel::PgConnection| {
        scalar(conn, "SELECT pg_relation_size('jobqueue_jobs') / 8192 AS n")
    };
    enqueue_all(&mut conn, (0..20_000).map(|seq| BenchNoop { seq }));
    let full = size(&mut conn);
    assert!(full > 100, "{full} pages");
    diesel::RunQueryDsl::execute(diesel::sql_query("DELETE FROM jobqueue_jobs"), &mut conn)
        .expect("delete");

    let mut session = jobqueue_core::QueueSession::establish(&db.url).expect("session");
    let vacuumed = session.vacuum_if_needed(0, false).expect("vacuum");
    assert!(vacuumed.is_some(), "the vacuum did not run");
    assert_eq!(
        size(&mut conn),
        full,
        "a vacuum not asked to shortened the table"
    );
    // Autovacuum follows the table's setting: no truncation either.
    diesel::RunQueryDsl::execute(diesel::sql_query("VACUUM jobqueue_jobs"), &mut conn)
        .expect("plain vacuum");
    assert_eq!(size(&mut conn), full, "a plain VACUUM shortened the table");

    session.vacuum_if_needed(0, true).expect("vacuum");
    assert_eq!(size(&mut conn), 0, "the empty table was not shortened");
}
