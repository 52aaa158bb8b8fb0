//! The runner as a separate process (`jobqueue-test-worker work`): every job
//! once, graceful SIGTERM, and kill -9 inside a handler's transaction.

use std::process::{Child, Command, Stdio};
use std::time::Duration;

use diesel::prelude::*;
use jobqueue_core::Job;
use jobqueue_tests::jobs::{Effect, Noop, Sleep};
use jobqueue_tests::{
    TestDb, count_where, effects_where, enqueue_all, read_job, status_counts, wait_completed,
    wait_for,
};

const WORKER: &str = env!("CARGO_BIN_EXE_jobqueue-test-worker");

/// `work` with `extra` flags, its output piped; the retention of completed
/// jobs left to the environment.
fn worker_command(db: &TestDb, extra: &[&str]) -> Command {
    let mut command = Command::new(WORKER);
    command
        .arg("--database-url")
        .arg(&db.url)
        .arg("work")
        .args(extra)
        .env("RUST_LOG", "warn")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    command
}

fn start_worker(db: &TestDb, extra: &[&str]) -> Child {
    worker_command(db, extra)
        // Completed rows kept, so each job's row shows how often it ran.
        .env("JOBQUEUE_RETAIN_COMPLETED_HOURS", "24")
        .spawn()
        .expect("start the worker process")
}

fn signal(child: &Child, name: &str) {
    let status = Command::new("kill")
        .arg(format!("-{name}"))
        .arg(child.id().to_string())
        .status()
        .expect("run kill");
    assert!(status.success(), "kill -{name} failed");
}

/// Stops the worker with SIGTERM and asserts that it exits with code 0.
fn stop(child: Child) {
    signal(&child, "TERM");
    let output = child.wait_with_output().expect("wait for the worker");
    assert_eq!(
        output.status.code(),
        Some(0),
        "stderr: {}",
        String::from_utf8_lossy(&output.stderr)
    );
}

#[test]
fn a_worker_process_completes_every_job_once_and_exits_0_on_sigterm() {
    let (db, mut conn) = TestDb::with_side_tables();
    const N: i64 = 2000;
    enqueue_all(&mut conn, (0..N as u64).map(|n| Noop { n }));
    let child = start_worker(&db, &["--concurrency", "16"]);
    wait_for("all jobs completed", Duration::from_secs(60), || {
        count_where(&mut conn, "status = 'completed'") == N
    });
    stop(child);
    assert_eq!(effects_where(&mut conn, "kind = 'run'"), N);
    assert_eq!(count_where(&mut conn, "attempts <> 1"), 0);
}

#[test]
fn by_default_a_worker_process_deletes_completed_jobs_and_counts_them() {
    let (db, mut conn) = TestDb::with_side_tables();
    const N: i64 = 500;
    enqueue_all(&mut conn, (0..N as u64).map(|n| Noop { n }));
    let child = worker_command(&db, &["--concurrency", "4"])
        .env_remove("JOBQUEUE_RETAIN_COMPLETED_HOURS")
        .spawn()
        .expect("start the worker process");
    wait_for(
        "every job done and its row gone",
        Duration::from_secs(60),
        || count_where(&mut conn, "true") == 0,
    );
    stop(child);
    assert_eq!(effects_where(&mut conn, "kind = 'run'"), N);
    assert_eq!(
        jobqueue_core::engine::completed_within(&mut conn, Duration::from_secs(3600))
            .expect("count"),
        N
    );
}

#[test]
fn sigterm_finishes_in_flight_jobs_and_hands_back_unstarted_ones() {
    let (db, mut conn) = TestDb::with_side_tables();
    enqueue_all(&mut conn, (0..10).map(|_| Sleep { ms: 1500 }));
    // Two workers, one prefetched job: 2 running, 1 claimed and waiting.
    let child = start_worker(&db, &["--concurrency", "2", "--grace-secs", "20"]);
    wait_for("two handlers running", Duration::from_secs(20), || {
        effects_where(&mut conn, "kind = 'start'") == 2
    });
    wait_for("a third job claimed", Duration::from_secs(5), || {
        count_where(&mut conn, "status IN ('claimed', 'running')") == 3
    });
    stop(child);
    assert_eq!(
        effects_where(&mut conn, "kind = 'done'"),
        2,
        "in-flight jobs finished"
    );
    assert_eq!(
        status_counts(&mut conn),
        [("pending", 8), ("completed", 2)],
        "the rest pending, none held"
    );
    assert_eq!(
        count_where(&mut conn, "status = 'pending' AND attempts <> 0"),
        0,
        "the rest keep their attempts"
    );
}

#[test]
fn kill_9_inside_the_handler_transaction_leaves_neither_effect_nor_completion() {
    let (db, mut conn) = TestDb::with_side_tables();
    let id = Effect { pause: true }
        .enqueue(&mut conn)
        .expect("enqueue")
        .id();
    let mut child = start_worker(&db, &["--concurrency", "1", "--lease-secs", "1"]);
    // The handler inserted its effect and sleeps before commit: its
    // uncommitted insert holds a lock on test_effects.
    wait_for(
        "the handler's open transaction",
        Duration::from_secs(20),
        || {
            #[derive(QueryableByName)]
            struct N {
                #[diesel(sql_type = diesel::sql_types::BigInt)]
                n: i64,
            }
            diesel::sql_query(
            "SELECT count(*) AS n FROM pg_locks l JOIN pg_class c ON c.oid = l.relation
             WHERE c.relname = 'test_effects' AND l.mode = 'RowExclusiveLock' AND l.pid <> pg_backend_pid()",
        )
        .get_result::<N>(&mut conn)
        .expect("locks")
        .n
            > 0
        },
    );
    signal(&child, "KILL");
    let _ = child.wait();
    assert_eq!(
        effects_where(&mut conn, "true"),
        0,
        "no effect without the completion"
    );
    let row = read_job(&mut conn, id);
    assert!(
        row.status.is_held(),
        "still held by the dead worker: {:?}",
        row.status
    );

    // A second worker recovers the job when its lease expires and runs it again.
    let child = start_worker(
        &db,
        &[
            "--concurrency",
            "1",
            "--lease-secs",
            "1",
            "--rescue-secs",
            "0.2",
        ],
    );
    wait_completed(&mut conn, id, Duration::from_secs(30));
    stop(child);
    assert_eq!(
        effects_where(&mut conn, "kind = 'effect'"),
        1,
        "the effect happened exactly once"
    );
    assert_eq!(
        effects_where(&mut conn, "kind = 'effect' AND attempt = 2"),
        1
    );
    let row = read_job(&mut conn, id);
    assert_eq!(row.attempts, 2);
    assert!(
        row.errors[0]["error"]
            .as_str()
            .is_some_and(|e| e.contains("worker lost"))
    );
}
