//! Fault injection, a stale worker: a runner frozen with SIGSTOP past its
//! lease while its handlers are mid-job; another runner recovers and
//! completes the jobs; then the frozen one is thawed with SIGCONT and its
//! late completions must change nothing (fencing).

use std::time::Duration;

use chrono::{DateTime, Utc};
use diesel::prelude::*;
use diesel::sql_types::{Integer, Nullable, Text, Timestamptz, Uuid};
use jobqueue_core::JobId;
use jobqueue_tests::fault::{Proc, Summary, Tally, runner_flags};
use jobqueue_tests::jobs::Stale;
use jobqueue_tests::{TestDb, count_where, effects_where, enqueue_all, wait_for};

const WORKER: &str = env!("CARGO_BIN_EXE_jobqueue-test-worker");
const JOBS: i64 = 8;

/// What a late write could change on a job row.
#[derive(Debug, PartialEq, QueryableByName)]
struct RowState {
    #[diesel(sql_type = Uuid)]
    id: JobId,
    #[diesel(sql_type = Text)]
    status: String,
    #[diesel(sql_type = Nullable<Text>)]
    worker_id: Option<String>,
    #[diesel(sql_type = Integer)]
    attempts: i32,
    #[diesel(sql_type = Integer)]
    claim_count: i32,
    #[diesel(sql_type = Nullable<Timestamptz>)]
    started_at: Option<DateTime<Utc>>,
    #[diesel(sql_type = Nullable<Timestamptz>)]
    heartbeat_at: Option<DateTime<Utc>>,
    #[diesel(sql_type = Nullable<Timestamptz>)]
    lease_expires_at: Option<DateTime<Utc>>,
    #[diesel(sql_type = Nullable<Timestamptz>)]
    finished_at: Option<DateTime<Utc>>,
    #[diesel(sql_type = Nullable<Text>)]
    last_error: Option<String>,
    #[diesel(sql_type = Text)]
    errors: String,
}

fn rows(conn: &mut PgConnection) -> Vec<RowState> {
    diesel::sql_query(
        "SELECT id, status, worker_id, attempts, claim_count, started_at, heartbeat_at,
                lease_expires_at, finished_at, last_error, errors::text AS errors
         FROM jobqueue_jobs ORDER BY id",
    )
    .load(conn)
    .expect("read rows")
}

#[test]
fn a_frozen_runner_thawed_after_recovery_changes_nothing() {
    let (db, mut conn) = TestDb::with_side_tables();
    let batch = (0..JOBS).map(|i| Stale {
        exactly_once: i % 2 == 0,
        pause_ms: 2500,
    });
    enqueue_all(&mut conn, batch);

    let flags = runner_flags(&[
        ("concurrency", "8"),
        ("lease-secs", "1.5"),
        ("rescue-secs", "0.3"),
        ("grace-secs", "10"),
    ]);
    let mut frozen = Proc::runner(WORKER, &db.url, "stale-a", &flags);
    wait_for("every handler mid-job", Duration::from_secs(30), || {
        effects_where(&mut conn, "kind = 'start' AND runner = 'stale-a'") == JOBS
    });
    frozen.signal("STOP");

    let mut rescuer = Proc::runner(WORKER, &db.url, "stale-b", &flags);
    wait_for(
        "the other runner to complete every job",
        Duration::from_secs(60),
        || count_where(&mut conn, "status = 'completed' AND worker_id = 'stale-b'") == JOBS,
    );
    let before = rows(&mut conn);
    assert!(frozen.is_running(), "the frozen runner is still there");

    frozen.signal("CONT");
    // Its handlers wake up and finish their first attempts: the
    // exactly-once ones try to complete in their transaction, the others
    // return and leave the completion to their runner.
    wait_for(
        "the thawed handlers to finish",
        Duration::from_secs(30),
        || {
            effects_where(&mut conn, "kind LIKE 'late-%'") == JOBS / 2
                && effects_where(&mut conn, "kind = 'done' AND runner = 'stale-a'") == JOBS / 2
        },
    );
    // A graceful stop writes every outcome still pending before exit 0.
    frozen.terminate(Duration::from_secs(30));
    let after = rows(&mut conn);

    let refused = effects_where(&mut conn, "kind = 'late-refused'");
    let changed = before.iter().zip(&after).filter(|(b, a)| b != a).count() as i64;
    let tally = Tally::of(&mut conn, "test.stale", "done");
    rescuer.terminate(Duration::from_secs(30));
    let stderr = frozen.stderr();
    Summary {
        scenario: "7 stale worker",
        jobs: JOBS,
        faults: 1,
        lost: tally.lost(),
        duplicated: tally.duplicated() + changed,
        detail: format!(
            "late_transactions_refused={refused} late_completion_warnings={} rows_changed_by_late_writes={changed}",
            stderr.matches("completion(s) not written").count()
        ),
    }
    .print_and_check();
    assert_eq!(before, after, "the late writes changed job rows");
    assert_eq!(refused, JOBS / 2, "every late transaction rolled back");
    assert_eq!(effects_where(&mut conn, "kind = 'late-ok'"), 0);
    assert_eq!(
        effects_where(&mut conn, "kind = 'effect'"),
        JOBS / 2,
        "one effect per exactly-once job"
    );
    assert_eq!(
        count_where(&mut conn, "attempts = 2 AND claim_count = 2"),
        JOBS,
        "each job claimed twice: once by each runner"
    );
    assert!(
        stderr.contains("completion(s) not written"),
        "the thawed runner says its late completions were refused: {stderr}"
    );
}
