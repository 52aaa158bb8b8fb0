//! Fault injection, clock skew: runner processes whose clocks are a year
//! ahead and a year behind (libfaketime, `apt-get install faketime`) work
//! beside an honest runner. Every scheduling decision uses the database's
//! clock: the fast one steals no live lease and runs nothing early, the slow
//! one delays nothing.

use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

use jobqueue_core::{Job, JobStatus};
use jobqueue_tests::fault::{Proc, Summary, assert_exit_0, runner_command};
use jobqueue_tests::jobs::{ClockProbe, Panic, Sleep};
use jobqueue_tests::{
    TestDb, assert_success, count_where, db_now, effects_where, enqueue_all, read_job, scalar,
    wait_for,
};

const WORKER: &str = env!("CARGO_BIN_EXE_jobqueue-test-worker");
const FUTURE: &str = "skew-future";
const PAST: &str = "skew-past";
/// A year, in days, as libfaketime spells offsets.
const OFFSET_DAYS: i64 = 365;

/// libfaketime's preload library, where Debian's `libfaketime` puts it.
fn libfaketime() -> PathBuf {
    let mut candidates: Vec<PathBuf> = std::fs::read_dir("/usr/lib")
        .into_iter()
        .flatten()
        .flatten()
        .map(|entry| entry.path().join("faketime/libfaketime.so.1"))
        .collect();
    candidates.push(PathBuf::from("/usr/lib/faketime/libfaketime.so.1"));
    candidates.push(PathBuf::from("/usr/local/lib/faketime/libfaketime.so.1"));
    candidates
        .into_iter()
        .find(|path| path.is_file())
        .expect("this test needs libfaketime: scripts/setup installs it (apt-get install faketime)")
}

/// `command` with its clock moved by `offset` (libfaketime's syntax, e.g.
/// `+365d`), preloaded directly rather than through the `faketime` wrapper,
/// so signals reach the process itself. The monotonic clock is left alone:
/// only wall-clock time lies.
fn skewed(offset: &str, mut command: Command) -> Command {
    command
        .env("LD_PRELOAD", libfaketime())
        .env("FAKETIME", offset)
        .env("FAKETIME_DONT_FAKE_MONOTONIC", "1");
    command
}

fn skewed_runner(db: &TestDb, offset: &str, name: &str, queue: &str) -> Proc {
    let command = runner_command(
        WORKER,
        &db.url,
        name,
        &[
            "--queues",
            queue,
            "--concurrency",
            "2",
            "--lease-secs",
            "1.5",
            "--rescue-secs",
            "0.2",
            "--retry-base-ms",
            "300",
        ],
    );
    Proc::spawn(name, skewed(offset, command))
}

#[test]
fn skewed_runner_clocks_neither_steal_leases_nor_move_schedules() {
    let (db, mut conn) = TestDb::with_side_tables();

    // An honest runner holds two long jobs, renewing their 1.5 s leases.
    let mut honest = Proc::runner(
        WORKER,
        &db.url,
        "clock-honest",
        &[
            "--queues",
            "default",
            "--concurrency",
            "2",
            "--lease-secs",
            "1.5",
        ],
    );
    enqueue_all(&mut conn, (0..2).map(|_| Sleep { ms: 4000 }));
    wait_for(
        "the honest runner's jobs running",
        Duration::from_secs(20),
        || effects_where(&mut conn, "kind = 'start'") == 2,
    );

    // A runner a year ahead recovers stale jobs every 0.2 s meanwhile; one a
    // year behind works its own queue.
    let mut ahead = skewed_runner(&db, &format!("+{OFFSET_DAYS}d"), "clock-ahead", FUTURE);
    let mut behind = skewed_runner(&db, &format!("-{OFFSET_DAYS}d"), "clock-behind", PAST);

    let mut probes = Vec::new();
    for queue in [FUTURE, PAST] {
        probes.push(
            ClockProbe {}
                .options()
                .queue(queue)
                .enqueue(&mut conn)
                .expect("due now")
                .id(),
        );
        probes.push(
            ClockProbe {}
                .options()
                .queue(queue)
                .delay(Duration::from_secs(2))
                .enqueue(&mut conn)
                .expect("due in 2 s")
                .id(),
        );
    }
    // Retries are scheduled by the database too: two quick attempts each.
    let panics: Vec<_> = [FUTURE, PAST]
        .into_iter()
        .map(|queue| {
            Panic {}
                .options()
                .queue(queue)
                .enqueue(&mut conn)
                .expect("enqueue")
                .id()
        })
        .collect();
    // A delay given to a skewed process's CLI is counted from the database's now().
    let mut cli = Command::new(WORKER);
    cli.args([
        "--database-url",
        &db.url,
        "enqueue",
        ClockProbe::JOB_TYPE,
        "{}",
        "--queue",
        PAST,
        "--delay-secs",
        "1",
    ]);
    let cli = skewed(&format!("+{OFFSET_DAYS}d"), cli)
        .output()
        .expect("run the skewed CLI");
    assert_success("the skewed CLI", &cli);
    let cli_delay_ms = scalar(
        &mut conn,
        "SELECT (EXTRACT(EPOCH FROM run_at - created_at) * 1000)::bigint AS n
         FROM jobqueue_jobs WHERE job_type = 'test.clock' AND queue = 'skew-past'
         ORDER BY created_at DESC LIMIT 1",
    );

    let total_probes = probes.len() as i64 + 1;
    wait_for(
        "every probe run and both panicking jobs failed",
        Duration::from_secs(30),
        || {
            count_where(
                &mut conn,
                "job_type = 'test.clock' AND status = 'completed'",
            ) == total_probes
                && count_where(&mut conn, "job_type = 'test.panic' AND status = 'failed'") == 2
        },
    );
    wait_for(
        "the honest runner's jobs done",
        Duration::from_secs(20),
        || {
            count_where(
                &mut conn,
                "job_type = 'test.sleep' AND status = 'completed'",
            ) == 2
        },
    );
    for runner in [&honest, &ahead, &behind] {
        runner.signal("TERM");
    }
    for runner in [&mut honest, &mut ahead, &mut behind] {
        let status = runner.wait_exit(Duration::from_secs(30));
        assert_exit_0(runner, status);
    }

    // The skew was real: each process's own clock, against the database's.
    let skew_days = |conn: &mut diesel::PgConnection, runner: &str| {
        scalar(
            conn,
            &format!(
                "SELECT round(avg(EXTRACT(EPOCH FROM local_at - at)) / 86400)::bigint AS n
                 FROM test_effects WHERE kind = 'clock' AND runner = '{runner}'"
            ),
        )
    };
    assert_eq!(skew_days(&mut conn, "clock-ahead"), OFFSET_DAYS);
    assert_eq!(skew_days(&mut conn, "clock-behind"), -OFFSET_DAYS);

    // No live lease stolen: the honest runner's jobs ran once, on their first claim.
    let stolen = count_where(
        &mut conn,
        "job_type = 'test.sleep' AND (attempts <> 1 OR claim_count <> 1 OR errors <> '[]'
            OR worker_id <> 'clock-honest')",
    );
    // Nothing ran before it was due, by the database's clock.
    let early = scalar(
        &mut conn,
        "SELECT count(*) AS n FROM test_effects e JOIN jobqueue_jobs j ON j.id = e.job_id
         WHERE e.attempt = j.attempts AND e.at < j.run_at",
    );
    // How long due jobs waited (the waits above bound it; a year-behind
    // clock would have left them waiting a year).
    let worst_delay_ms = scalar(
        &mut conn,
        "SELECT (max(EXTRACT(EPOCH FROM e.at - j.run_at)) * 1000)::bigint AS n
         FROM test_effects e JOIN jobqueue_jobs j ON j.id = e.job_id
         WHERE e.attempt = j.attempts AND j.queue IN ('skew-future', 'skew-past')",
    );
    let mut lost = 0;
    for id in &probes {
        let row = read_job(&mut conn, *id);
        lost += i64::from(row.status != JobStatus::Completed);
    }
    for id in &panics {
        let row = read_job(&mut conn, *id);
        lost += i64::from(row.status != JobStatus::Failed || row.attempts != 2);
    }
    let duplicated = stolen
        + scalar(
            &mut conn,
            "SELECT count(*) AS n FROM (SELECT job_id FROM test_effects
             GROUP BY job_id, attempt, kind HAVING count(*) > 1) AS d",
        );
    Summary {
        scenario: "9 clock skew",
        jobs: count_where(&mut conn, "true"),
        faults: 3,
        lost,
        duplicated,
        detail: format!(
            "clock_offsets_days=+{OFFSET_DAYS},-{OFFSET_DAYS} leases_stolen={stolen} run_early={early} \
             worst_pickup_ms_after_due={worst_delay_ms} cli_delay_1s_stored_as_ms={cli_delay_ms}"
        ),
    }
    .print_and_check();
    assert_eq!(early, 0, "jobs ran before they were due");
    // run_at and created_at both come from one statement's now().
    assert_eq!(
        cli_delay_ms, 1000,
        "a 1 s delay from a skewed CLI became {cli_delay_ms} ms"
    );
}

#[test]
fn skewed_runner_clocks_fire_no_periodic_slot_early_or_twice() {
    let (db, mut conn) = TestDb::with_side_tables();
    let started = db_now(&mut conn);
    // Two runners a year apart declare the same every-second schedule.
    let runners: Vec<Proc> = [("+365d", "cron-fast"), ("-365d", "cron-slow")]
        .into_iter()
        .map(|(offset, name)| {
            let mut command = runner_command(
                WORKER,
                &db.url,
                name,
                &["--poll-interval-ms", "200", "--queues", "cron-skew"],
            );
            command.env(
                "JOBQUEUE_TEST_SCHEDULES",
                "skewed|* * * * * *|catch_up:30|7",
            );
            Proc::spawn(name, skewed(offset, command))
        })
        .collect();
    wait_for("five slots fired", Duration::from_secs(30), || {
        count_where(&mut conn, "payload->>'n' = '7'") >= 5
    });
    drop(runners);
    let ended = db_now(&mut conn);
    let early = count_where(
        &mut conn,
        &format!(
            "payload->>'n' = '7' AND (run_at > '{}' OR run_at < '{}')",
            ended.to_rfc3339(),
            (started - chrono::Duration::seconds(1)).to_rfc3339()
        ),
    );
    let twice = scalar(
        &mut conn,
        "SELECT count(*) AS n FROM (SELECT run_at FROM jobqueue_jobs WHERE payload->>'n' = '7'
         GROUP BY run_at HAVING count(*) > 1) AS d",
    );
    let fired = count_where(&mut conn, "payload->>'n' = '7'");
    println!(
        "periodic under skewed clocks: {fired} slots fired, {early} outside the database's time, {twice} twice"
    );
    assert_eq!((early, twice), (0, 0));
}
