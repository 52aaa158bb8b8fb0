//! The runner as a separate process (`jobqueue-test-worker work`): every job
//! once, graceful SIGTERM, and kill -9 inside a handler's transaction.

use std::process::{Child, Command, Stdio};
use std::time::Duration;

use diesel::prelude::*;
use jobqueue_core::{Job, JobOptions, NewJob, enqueue_many, get_job};
use jobqueue_tests::jobs::{Effect, Noop, Sleep};
use jobqueue_tests::{TestDb, count_where, effects_where, wait_completed, wait_for};

const WORKER: &str = env!("CARGO_BIN_EXE_jobqueue-test-worker");

fn start_worker(db: &TestDb, extra: &[&str]) -> Child {
    Command::new(WORKER)
        .arg("--database-url")
        .arg(&db.url)
        .arg("work")
        .args(extra)
        .env("RUST_LOG", "warn")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
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

/// Waits for the process to exit; returns its code and stderr.
fn finish(child: Child) -> (Option<i32>, String) {
    let output = child.wait_with_output().expect("wait for the worker");
    (
        output.status.code(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

fn setup() -> (TestDb, PgConnection) {
    TestDb::with_side_tables()
}

#[test]
fn a_worker_process_completes_every_job_once_and_exits_0_on_sigterm() {
    let (db, mut conn) = setup();
    const N: i64 = 2000;
    let batch: Vec<NewJob> = (0..N as u64)
        .map(|n| NewJob::from_job(&Noop { n }, JobOptions::new()))
        .collect::<Result<_, _>>()
        .expect("build");
    enqueue_many(&mut conn, &batch).expect("enqueue");
    let child = start_worker(&db, &["--concurrency", "16"]);
    wait_for("all jobs completed", Duration::from_secs(60), || {
        count_where(&mut conn, "status = 'completed'") == N
    });
    signal(&child, "TERM");
    let (code, stderr) = finish(child);
    assert_eq!(code, Some(0), "stderr: {stderr}");
    assert_eq!(effects_where(&mut conn, "kind = 'run'"), N);
    assert_eq!(count_where(&mut conn, "attempts <> 1"), 0);
}

#[test]
fn sigterm_finishes_in_flight_jobs_and_hands_back_unstarted_ones() {
    let (db, mut conn) = setup();
    let batch: Vec<NewJob> = (0..10)
        .map(|_| NewJob::from_job(&Sleep { ms: 1500 }, JobOptions::new()))
        .collect::<Result<_, _>>()
        .expect("build");
    enqueue_many(&mut conn, &batch).expect("enqueue");
    // Two workers, one prefetched job: 2 running, 1 claimed and waiting.
    let child = start_worker(&db, &["--concurrency", "2", "--grace-secs", "20"]);
    wait_for("two handlers running", Duration::from_secs(20), || {
        effects_where(&mut conn, "kind = 'start'") == 2
    });
    wait_for("a third job claimed", Duration::from_secs(5), || {
        count_where(&mut conn, "status IN ('claimed', 'running')") == 3
    });
    signal(&child, "TERM");
    let (code, stderr) = finish(child);
    assert_eq!(code, Some(0), "stderr: {stderr}");
    assert_eq!(
        effects_where(&mut conn, "kind = 'done'"),
        2,
        "in-flight jobs finished"
    );
    assert_eq!(count_where(&mut conn, "status = 'completed'"), 2);
    assert_eq!(
        count_where(&mut conn, "status = 'pending' AND attempts = 0"),
        8,
        "the rest pending, attempts unchanged"
    );
    assert_eq!(
        count_where(&mut conn, "status IN ('claimed', 'running')"),
        0
    );
}

#[test]
fn kill_9_inside_the_handler_transaction_leaves_neither_effect_nor_completion() {
    let (db, mut conn) = setup();
    let id = Effect { pause: true }.enqueue(&mut conn).expect("enqueue");
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
    let row = get_job(&mut conn, id).expect("read").expect("row");
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
    signal(&child, "TERM");
    let (code, stderr) = finish(child);
    assert_eq!(code, Some(0), "stderr: {stderr}");
    assert_eq!(
        effects_where(&mut conn, "kind = 'effect'"),
        1,
        "the effect happened exactly once"
    );
    assert_eq!(
        effects_where(&mut conn, "kind = 'effect' AND attempt = 2"),
        1
    );
    let row = get_job(&mut conn, id).expect("read").expect("row");
    assert_eq!(row.attempts, 2);
    assert!(
        row.errors[0]["error"]
            .as_str()
            .is_some_and(|e| e.contains("worker lost"))
    );
}
