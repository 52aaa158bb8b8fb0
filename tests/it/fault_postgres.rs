//! Fault injection, the database goes away: PostgreSQL stopped in immediate
//! mode (a crash) and started again under running runners, and every runner
//! connection dropped with `pg_terminate_backend`, several times. The
//! runners must reconnect by themselves, without being restarted, and finish
//! every job, each exactly-once effect once.

use std::time::Duration;

use diesel::prelude::*;
use diesel::sql_types::Double;
use jobqueue_tests::fault::{OwnCluster, Proc, Summary, Tally, assert_exit_0, runner_flags};
use jobqueue_tests::jobs::Chaos;
use jobqueue_tests::{TestDb, count_where, enqueue_all, scalar, wait_for, wait_no_live_jobs};
use jobqueue_tools::postgres::StopMode;

const WORKER: &str = env!("CARGO_BIN_EXE_jobqueue-test-worker");
const JOBS: usize = 3000;

fn enqueue_chaos(conn: &mut PgConnection, ms: u64) {
    enqueue_all(conn, Chaos::mix(JOBS, ms));
}

fn completed(conn: &mut PgConnection) -> i64 {
    count_where(conn, "status = 'completed'")
}

#[derive(QueryableByName)]
struct Ms {
    #[diesel(sql_type = Double)]
    ms: f64,
}

/// Milliseconds from `since` (an SQL timestamp expression) to the first
/// completion at or after it, by the database's clock.
fn first_completion_after(conn: &mut PgConnection, since: &str) -> f64 {
    diesel::sql_query(format!(
        "SELECT (EXTRACT(EPOCH FROM min(finished_at) - {since}) * 1000)::float8 AS ms
         FROM jobqueue_jobs WHERE finished_at >= {since}"
    ))
    .get_result::<Ms>(conn)
    .expect("first completion")
    .ms
}

/// Connections of this database waiting on `LISTEN jobqueue_jobs`: one per
/// runner whose listener is connected.
fn listening(conn: &mut PgConnection) -> i64 {
    scalar(
        conn,
        "SELECT count(*) AS n FROM pg_stat_activity
         WHERE datname = current_database() AND query = 'LISTEN \"jobqueue_jobs\"'",
    )
}

/// Asserts that each runner's stderr has `count` lines containing `text`,
/// for each `(text, count)`.
fn assert_logged(runners: &[Proc], expected: &[(&str, usize)]) {
    for runner in runners {
        let stderr = runner.stderr();
        for (text, count) in expected {
            let found = stderr.lines().filter(|l| l.contains(text)).count();
            assert_eq!(
                found,
                *count,
                "{}: lines with `{text}`; its log:\n{stderr}",
                runner.name()
            );
        }
    }
}

/// Stops both runners with SIGTERM; each must exit 0.
fn stop_runners(runners: &mut [Proc]) {
    for runner in runners.iter() {
        runner.signal("TERM");
    }
    for runner in runners.iter_mut() {
        let status = runner.wait_exit(Duration::from_secs(30));
        assert_exit_0(runner, status);
    }
}

#[test]
fn runners_ride_out_a_postgres_crash_and_restart() {
    let pg = OwnCluster::start();
    let mut conn = pg.conn();
    enqueue_chaos(&mut conn, 10);
    let mut runners = vec![
        Proc::runner(WORKER, &pg.url, "restart-a", &runner_flags(&[])),
        Proc::runner(WORKER, &pg.url, "restart-b", &runner_flags(&[])),
    ];
    wait_for(
        "a quarter of the jobs done",
        Duration::from_secs(60),
        || completed(&mut conn) >= (JOBS / 4) as i64,
    );
    drop(conn);

    pg.cluster()
        .stop(StopMode::Immediate)
        .expect("stop PostgreSQL (immediate mode)");
    assert!(
        PgConnection::establish(&pg.url).is_err(),
        "the database is down"
    );
    // An outage the runners sit through: they must back off, not exit.
    std::thread::sleep(Duration::from_millis(1500));
    for runner in &mut runners {
        assert!(
            runner.is_running(),
            "{} exited in the outage",
            runner.name()
        );
    }
    pg.cluster().start().expect("start PostgreSQL again");
    pg.cluster()
        .wait_ready(Duration::from_secs(30))
        .expect("PostgreSQL back");

    let mut conn = pg.conn();
    let since = "pg_postmaster_start_time()";
    wait_for(
        "a completion after the restart",
        Duration::from_secs(60),
        || count_where(&mut conn, &format!("finished_at >= {since}")) > 0,
    );
    let first_ms = first_completion_after(&mut conn, since);
    wait_for(
        "both listeners connected again",
        Duration::from_secs(30),
        || listening(&mut conn) == 2,
    );
    wait_no_live_jobs(&mut conn, Duration::from_secs(120));
    for runner in &mut runners {
        assert!(
            runner.is_running(),
            "{} still runs: it was never restarted",
            runner.name()
        );
        let after = count_where(
            &mut conn,
            &format!("worker_id = '{}' AND finished_at >= {since}", runner.name()),
        );
        assert!(
            after > 0,
            "{} completed nothing after the restart",
            runner.name()
        );
    }
    stop_runners(&mut runners);
    // One line when the database went away and one when it was back, per
    // runner; no thread logs the outage again on its own.
    assert_logged(
        &runners,
        &[
            ("database unavailable", 1),
            ("database reachable again", 1),
            ("claim failed", 0),
        ],
    );

    let tally = Tally::of(&mut conn, "test.chaos", "attempt");
    Summary {
        scenario: "2 postgres restart",
        jobs: tally.jobs,
        faults: 1,
        lost: tally.lost(),
        duplicated: tally.duplicated(),
        detail: format!(
            "first_completion_ms_after_restart={first_ms:.0} at_least_once_reexecutions={} held={}",
            tally.reexecutions, tally.held
        ),
    }
    .print_and_check();
    assert_eq!(tally.held, 0);
}

#[test]
fn runners_ride_out_dropped_connections() {
    const ROUNDS: i64 = 5;
    let (db, mut conn) = TestDb::with_side_tables();
    enqueue_chaos(&mut conn, 20);
    let mut runners = vec![
        Proc::runner(WORKER, &db.url, "drop-a", &runner_flags(&[])),
        Proc::runner(WORKER, &db.url, "drop-b", &runner_flags(&[])),
    ];
    let mut terminated = 0;
    for round in 1..=ROUNDS {
        // Both runners are listening again and have worked since the last drop.
        let done_before = completed(&mut conn);
        wait_for(
            &format!("both listeners connected (round {round})"),
            Duration::from_secs(30),
            || listening(&mut conn) == 2,
        );
        wait_for(
            &format!("progress before drop {round}"),
            Duration::from_secs(30),
            || completed(&mut conn) >= done_before + 100,
        );
        assert!(
            completed(&mut conn) < JOBS as i64,
            "all jobs done before drop {round}: the drops must hit work in progress"
        );
        let n = scalar(
            &mut conn,
            "SELECT count(pg_terminate_backend(pid)) AS n FROM pg_stat_activity
             WHERE datname = current_database() AND pid <> pg_backend_pid()
               AND backend_type = 'client backend'",
        );
        // Each runner's listener, and the fetcher and connections of the
        // handlers that just made progress, at the least.
        assert!(n >= 4, "round {round}: only {n} connections to drop");
        terminated += n;
        if round == ROUNDS {
            diesel::sql_query("CREATE TEMP TABLE last_drop AS SELECT clock_timestamp() AS at")
                .execute(&mut conn)
                .expect("note the time of the last drop");
        }
    }
    wait_for(
        "the listeners back after the last drop",
        Duration::from_secs(30),
        || listening(&mut conn) == 2,
    );
    let first_ms = {
        wait_for(
            "a completion after the last drop",
            Duration::from_secs(60),
            || count_where(&mut conn, "finished_at >= (SELECT at FROM last_drop)") > 0,
        );
        first_completion_after(&mut conn, "(SELECT at FROM last_drop)")
    };
    wait_no_live_jobs(&mut conn, Duration::from_secs(120));
    for runner in &mut runners {
        assert!(runner.is_running(), "{} was never restarted", runner.name());
    }
    stop_runners(&mut runners);
    // A connection the server ended is replaced at once: no outage to log.
    assert_logged(
        &runners,
        &[("database unavailable", 0), ("claim failed", 0)],
    );

    let tally = Tally::of(&mut conn, "test.chaos", "attempt");
    Summary {
        scenario: "3 dropped connections",
        jobs: tally.jobs,
        faults: ROUNDS,
        lost: tally.lost(),
        duplicated: tally.duplicated(),
        detail: format!(
            "connections_terminated={terminated} first_completion_ms_after_last_drop={first_ms:.0} \
             at_least_once_reexecutions={} held={}",
            tally.reexecutions, tally.held
        ),
    }
    .print_and_check();
    assert_eq!(tally.held, 0);
}
