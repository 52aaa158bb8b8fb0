//! A runner's maintenance runs each of its tasks on its own timer: with
//! recovery and pruning a minute away, the vacuum still runs every 100 ms
//! once enough dead row versions have piled up.

use std::time::{Duration, Instant};

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
/// the transaction ends, it sees the horizon move and vacuums at once,
/// without waiting out the back-off.
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
    let pinned = Instant::now();
    // Backing off from 100 ms, the 4 vacuums after the first wait 0.2, 0.4,
    // 0.8 and 1.6 s (less 10 % of jitter at most): at least 2.7 s in all,
    // where one every 100 ms would take 0.4 s.
    wait_for("4 more vacuums", Duration::from_secs(30), || {
        vacuums(&mut conn) >= first + 4
    });
    let backed_off = pinned.elapsed();
    assert!(
        backed_off >= Duration::from_millis(2_500),
        "4 vacuums in {backed_off:?} while the horizon was pinned: no back-off"
    );
    // The next vacuum is due 3.2 s (at least 2.88 s) after the last. Once
    // the pin ends, the look at the horizon (every 100 ms while backing
    // off) finds its holder gone and vacuums at once instead.
    diesel::sql_query("COMMIT")
        .execute(&mut pin)
        .expect("commit");
    let ended = Instant::now();
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
    let reclaimed = ended.elapsed();
    assert!(
        reclaimed < Duration::from_millis(2_000),
        "the dead versions went {reclaimed:?} after the pin ended: the vacuum waited out its \
         back-off instead of seeing the horizon move"
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

    let mut session = jobqueue_core::engine::QueueSession::establish(&db.url).expect("session");
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

/// `QueueSession::xmin_horizon` reads the snapshot of a transaction that
/// pins the horizon, the same while it stays open, and not once it ends; a
/// pin in another database (older still) is not this database's horizon.
#[test]
fn the_xmin_horizon_names_its_holder_until_it_ends() {
    use diesel::RunQueryDsl as _;
    /// Opens a `REPEATABLE READ` transaction on `conn` and returns its
    /// snapshot's xmin.
    fn pin(conn: &mut diesel::PgConnection) -> i64 {
        diesel::sql_query("BEGIN ISOLATION LEVEL REPEATABLE READ")
            .execute(conn)
            .expect("begin");
        scalar(
            conn,
            "SELECT backend_xmin::text::int8 AS n FROM pg_stat_activity WHERE pid = pg_backend_pid()",
        )
    }
    let (db, other) = (TestDb::new(), TestDb::new());
    let mut session = jobqueue_core::engine::QueueSession::establish(&db.url).expect("session");
    let mut elsewhere = other.conn();
    pin(&mut elsewhere);
    // Nothing of this database holds its horizon (this session's own look
    // does not count).
    assert_eq!(session.xmin_horizon().expect("look"), None);
    let mut here = db.conn();
    let here_xmin = pin(&mut here);
    assert_eq!(session.xmin_horizon().expect("look"), Some(here_xmin));
    // Sessions come and go; the pin stays the oldest.
    enqueue_all(&mut db.conn(), (0..10).map(|_| BenchNoop { seq: 0 }));
    assert_eq!(session.xmin_horizon().expect("look"), Some(here_xmin));
    diesel::sql_query("COMMIT")
        .execute(&mut here)
        .expect("commit");
    assert_eq!(session.xmin_horizon().expect("look"), None);
    diesel::sql_query("COMMIT")
        .execute(&mut elsewhere)
        .expect("commit");
}
