//! Fault injection, stopping under load and handlers that never return:
//! SIGTERM while 32 jobs run and more are claimed; a handler that ignores
//! every request to stop, with and without a timeout.

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use diesel::prelude::*;
use diesel::sql_types::Uuid;
use jobqueue_core::{Job, JobId, JobStatus};
use jobqueue_tests::fault::{Proc, Summary, assert_exit_0, runner_flags};
use jobqueue_tests::jobs::{Hang, HangTimeout, Noop, Sleep};
use jobqueue_tests::{
    TestDb, count_where, effects_where, enqueue_all, read_job, wait_completed, wait_count, wait_for,
};

const WORKER: &str = env!("CARGO_BIN_EXE_jobqueue-test-worker");

#[derive(QueryableByName)]
struct IdRow {
    #[diesel(sql_type = Uuid)]
    job_id: JobId,
}

fn started_jobs(conn: &mut PgConnection) -> BTreeSet<JobId> {
    diesel::sql_query("SELECT DISTINCT job_id FROM test_effects WHERE kind = 'start'")
        .load::<IdRow>(conn)
        .expect("started jobs")
        .into_iter()
        .map(|r| r.job_id)
        .collect()
}

fn enqueue_noops(conn: &mut PgConnection, n: u64) {
    enqueue_all(conn, (0..n).map(|n| Noop { n }));
}

#[test]
fn sigterm_under_load_finishes_in_flight_jobs_and_hands_back_the_rest() {
    const JOBS: usize = 100;
    let (db, mut conn) = TestDb::with_side_tables();
    let all: BTreeSet<JobId> = enqueue_all(&mut conn, (0..JOBS).map(|_| Sleep { ms: 2000 }))
        .into_iter()
        .collect();

    // 32 workers and a prefetch of 8: 32 jobs running, 8 claimed and waiting.
    let mut first = Proc::runner(
        WORKER,
        &db.url,
        "term-1",
        &[
            "--concurrency",
            "32",
            "--lease-secs",
            "10",
            "--grace-secs",
            "30",
        ],
    );
    wait_for("32 handlers running", Duration::from_secs(30), || {
        effects_where(&mut conn, "kind = 'start'") == 32
    });
    wait_count(&mut conn, "status IN ('claimed', 'running')", 40);
    let in_flight = started_jobs(&mut conn);
    assert_eq!(in_flight.len(), 32);
    first.terminate(Duration::from_secs(30));

    // Whatever had started finished; nothing else was touched.
    let started = started_jobs(&mut conn);
    assert!(started.is_superset(&in_flight));
    let mut lost = 0;
    for id in &all {
        let row = read_job(&mut conn, *id);
        let fine = if started.contains(id) {
            row.status == JobStatus::Completed
                && row.attempts == 1
                && effects_where(&mut conn, &format!("job_id = '{id}' AND kind = 'done'")) == 1
        } else {
            row.status == JobStatus::Pending
                && row.attempts == 0
                && row.worker_id.is_none()
                && row.last_error.is_none()
        };
        if !fine {
            lost += 1;
            eprintln!(
                "after SIGTERM: {id} is {:?} ({} attempts)",
                row.status, row.attempts
            );
        }
    }
    let handed_back = count_where(&mut conn, "status = 'pending' AND attempts = 0");
    let finished_in_grace = started.len();

    // A second runner finishes the rest, each job once.
    let mut second = Proc::runner(
        WORKER,
        &db.url,
        "term-2",
        &["--concurrency", "34", "--lease-secs", "10"],
    );
    wait_count(&mut conn, "status = 'completed'", JOBS as i64);
    second.terminate(Duration::from_secs(30));
    lost += count_where(&mut conn, "status <> 'completed' OR attempts <> 1");
    let duplicated = diesel::sql_query(
        "SELECT job_id FROM test_effects GROUP BY job_id, kind HAVING count(*) > 1",
    )
    .load::<IdRow>(&mut conn)
    .expect("duplicates")
    .len() as i64;
    Summary {
        scenario: "4 graceful shutdown",
        jobs: JOBS as i64,
        faults: 1,
        lost,
        duplicated,
        detail: format!(
            "in_flight_at_sigterm={} claimed_unstarted_at_sigterm=8 finished_in_grace={finished_in_grace} \
             handed_back_attempts_unchanged={handed_back}",
            in_flight.len()
        ),
    }
    .print_and_check();
    assert_eq!(handed_back, (JOBS - finished_in_grace) as i64);
}

/// Flags for a runner of two workers that looks for lost jobs every 0.3 s,
/// leases of `lease_secs` and `grace_secs` to stop.
fn two_worker_flags(lease_secs: &str, grace_secs: u64) -> Vec<String> {
    runner_flags(&[
        ("concurrency", "2"),
        ("lease-secs", lease_secs),
        ("rescue-secs", "0.3"),
        ("grace-secs", &grace_secs.to_string()),
    ])
}

#[test]
fn a_handler_that_never_returns_is_recovered_after_its_runner_stops() {
    let (db, mut conn) = TestDb::with_side_tables();
    const GRACE_SECS: u64 = 3;
    let args = &two_worker_flags("1.5", GRACE_SECS);
    let stuck = Hang {
        every_attempt: false,
    }
    .enqueue(&mut conn)
    .expect("enqueue")
    .id();
    let mut a = Proc::runner(WORKER, &db.url, "hang-a", args);
    wait_for("the handler to hang", Duration::from_secs(30), || {
        effects_where(&mut conn, "kind = 'start'") == 1
    });
    // Its runner keeps working on its other worker.
    enqueue_noops(&mut conn, 20);
    wait_count(&mut conn, "status = 'completed'", 20);
    let mut b = Proc::runner(WORKER, &db.url, "hang-b", args);

    a.signal("TERM");
    let signalled = Instant::now();
    let status = a.wait_exit(Duration::from_secs(GRACE_SECS + 10));
    let stop_secs = signalled.elapsed().as_secs_f64();
    assert_exit_0(&a, status);
    assert!(
        a.stderr().contains("still running"),
        "the runner says it left a handler behind: {}",
        a.stderr()
    );

    wait_completed(&mut conn, stuck, Duration::from_secs(30));
    let row = read_job(&mut conn, stuck);
    assert_eq!(row.worker_id.as_deref(), Some("hang-b"));
    assert_eq!(row.attempts, 2);
    assert!(
        row.errors[0]["error"]
            .as_str()
            .is_some_and(|e| e.contains("worker lost") && e.contains("hang-a")),
        "{:?}",
        row.errors
    );
    b.terminate(Duration::from_secs(30));

    let done = effects_where(&mut conn, "kind = 'done'");
    let lost = count_where(&mut conn, "status <> 'completed'") + i64::from(done == 0);
    let duplicated =
        (done - 1).max(0) + count_where(&mut conn, "job_type = 'test.noop' AND attempts <> 1");
    Summary {
        scenario: "5 hung handler, runner stopped",
        jobs: 21,
        faults: 1,
        lost,
        duplicated,
        detail: format!("grace_secs={GRACE_SECS} stuck_runner_exit_secs={stop_secs:.1}"),
    }
    .print_and_check();
}

#[test]
fn a_handler_past_its_timeout_loses_its_lease_while_its_runner_lives_on() {
    let (db, mut conn) = TestDb::with_side_tables();
    const GRACE_SECS: u64 = 2;
    let args = &two_worker_flags("1", GRACE_SECS);
    // Hangs on its first attempt only: another attempt completes it.
    let once = HangTimeout {
        every_attempt: false,
    }
    .enqueue(&mut conn)
    .expect("enqueue")
    .id();
    // Hangs on both of its attempts: it ends failed.
    let always = HangTimeout {
        every_attempt: true,
    }
    .options()
    .max_attempts(2)
    .enqueue(&mut conn)
    .expect("enqueue")
    .id();
    let mut runners = vec![
        Proc::runner(WORKER, &db.url, "timeout-a", args),
        Proc::runner(WORKER, &db.url, "timeout-b", args),
    ];
    let status_of = |conn: &mut PgConnection, id: JobId| read_job(conn, id).status;
    wait_for(
        "the once-stuck job completed and the always-stuck one failed",
        Duration::from_secs(60),
        || {
            status_of(&mut conn, once) == JobStatus::Completed
                && status_of(&mut conn, always) == JobStatus::Failed
        },
    );
    let row = read_job(&mut conn, once);
    assert_eq!(row.attempts, 2);
    let row = read_job(&mut conn, always);
    assert_eq!(row.attempts, 2);
    assert!(
        row.last_error
            .as_deref()
            .is_some_and(|e| e.contains("worker lost") && e.contains("attempt 2 of 2")),
        "{:?}",
        row.last_error
    );

    // Both runners, stuck threads and all, keep working...
    enqueue_noops(&mut conn, 40);
    wait_count(
        &mut conn,
        "job_type = 'test.noop' AND status = 'completed'",
        40,
    );
    for runner in &mut runners {
        assert!(runner.is_running(), "{} still runs", runner.name());
    }
    // ...and stop within their grace period, leaving the stuck threads.
    for runner in &runners {
        runner.signal("TERM");
    }
    let signalled = Instant::now();
    for runner in &mut runners {
        let status = runner.wait_exit(Duration::from_secs(GRACE_SECS + 10));
        assert_exit_0(runner, status);
    }
    let stop_secs = signalled.elapsed().as_secs_f64();
    let stuck_handlers = effects_where(&mut conn, "kind = 'start'") - 1;

    let done = effects_where(&mut conn, "kind = 'done'");
    let lost = count_where(
        &mut conn,
        "job_type = 'test.noop' AND status <> 'completed'",
    ) + i64::from(status_of(&mut conn, once) != JobStatus::Completed)
        + i64::from(done == 0);
    let duplicated =
        (done - 1).max(0) + count_where(&mut conn, "job_type = 'test.noop' AND attempts <> 1");
    Summary {
        scenario: "5 hung handler, timeout",
        jobs: 42,
        faults: stuck_handlers,
        lost,
        duplicated,
        detail: format!("grace_secs={GRACE_SECS} runners_exit_secs={stop_secs:.1}"),
    }
    .print_and_check();
    assert_eq!(stuck_handlers, 3, "attempt 1 of each, attempt 2 of one");
}
