//! Fault injection, hostile database settings: the database defaults to
//! SERIALIZABLE, one session holds row locks on the head of the queue, and
//! another keeps locking and rewriting random job rows (which makes for
//! lock waits, deadlocks and serialization failures). The queue's statements
//! pin READ COMMITTED, skip locked rows and retry what fails: nothing is lost.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use diesel::prelude::*;
use diesel::sql_types::{Array, BigInt, Text, Uuid};
use jobqueue_core::JobId;
use jobqueue_tests::fault::{Proc, Summary, Tally, assert_exit_0, runner_command, runner_flags};
use jobqueue_tests::jobs::Chaos;
use jobqueue_tests::{TestDb, count_where, enqueue_all, wait_for, wait_no_live_jobs};

const WORKER: &str = env!("CARGO_BIN_EXE_jobqueue-test-worker");
const JOBS: usize = 2000;
const HELD: i64 = 100;

#[derive(QueryableByName)]
struct IdRow {
    #[diesel(sql_type = Uuid)]
    id: JobId,
}

#[derive(QueryableByName)]
struct N {
    #[diesel(sql_type = BigInt)]
    n: i64,
}

#[derive(QueryableByName)]
struct Setting {
    #[diesel(sql_type = Text)]
    default_transaction_isolation: String,
}

/// Stops the churning session when dropped, a failed assertion included.
struct StopOnDrop(Arc<AtomicBool>);

impl Drop for StopOnDrop {
    fn drop(&mut self) {
        self.0.store(true, Ordering::Relaxed);
    }
}

/// What the churning session ran into.
#[derive(Debug, Default)]
struct Churn {
    transactions: u64,
    serialization_failures: u64,
    deadlocks: u64,
    other_errors: Vec<String>,
}

/// Until `stop`, locks 20 random job rows (none of `held`), rewrites them
/// without changing anything the queue reads, holds them 50 ms, commits.
fn churn(url: String, held: Vec<JobId>, stop: Arc<AtomicBool>) -> Churn {
    let mut conn = PgConnection::establish(&url).expect("connect the churning session");
    let mut churn = Churn::default();
    while !stop.load(Ordering::Relaxed) {
        let result = conn.transaction::<_, diesel::result::Error, _>(|conn| {
            diesel::sql_query(
                "UPDATE jobqueue_jobs SET events_count = events_count
                 WHERE id IN (SELECT id FROM jobqueue_jobs WHERE id <> ALL($1)
                              ORDER BY random() LIMIT 20)",
            )
            .bind::<Array<Uuid>, _>(&held)
            .execute(conn)?;
            std::thread::sleep(Duration::from_millis(50));
            Ok(())
        });
        churn.transactions += 1;
        match result {
            Ok(()) => {}
            Err(e) => {
                let text = e.to_string();
                if text.contains("could not serialize") {
                    churn.serialization_failures += 1;
                } else if text.contains("deadlock") {
                    churn.deadlocks += 1;
                } else {
                    churn.other_errors.push(text);
                }
            }
        }
    }
    churn
}

#[test]
fn serializable_default_and_foreign_row_locks_lose_nothing() {
    let (db, mut conn) = TestDb::with_side_tables();
    diesel::sql_query(
        "DO $$ BEGIN EXECUTE format(
             'ALTER DATABASE %I SET default_transaction_isolation = %L',
             current_database(), 'serializable'); END $$",
    )
    .execute(&mut conn)
    .expect("make SERIALIZABLE the database default");
    let mut conn = db.conn();
    let setting = diesel::sql_query("SHOW default_transaction_isolation")
        .get_result::<Setting>(&mut conn)
        .expect("show");
    assert_eq!(setting.default_transaction_isolation, "serializable");

    enqueue_all(&mut conn, Chaos::mix(JOBS, 5));

    // A session holding the head of the queue: the very rows a claim would
    // take first.
    let mut holder = db.conn();
    diesel::sql_query("BEGIN")
        .execute(&mut holder)
        .expect("begin");
    let held: Vec<JobId> = diesel::sql_query(format!(
        "SELECT id FROM jobqueue_jobs WHERE status = 'pending'
         ORDER BY priority DESC, run_at, id LIMIT {HELD} FOR UPDATE"
    ))
    .load::<IdRow>(&mut holder)
    .expect("lock the head of the queue")
    .into_iter()
    .map(|r| r.id)
    .collect();
    assert_eq!(held.len() as i64, HELD);

    let stop = StopOnDrop(Arc::new(AtomicBool::new(false)));
    let churner = {
        let (url, stop, held) = (db.url.clone(), Arc::clone(&stop.0), held.clone());
        std::thread::spawn(move || churn(url, held, stop))
    };
    // At debug level a runner logs every claim it could not make.
    let mut runners: Vec<Proc> = ["hostile-a", "hostile-b"]
        .into_iter()
        .map(|name| {
            let mut command = runner_command(
                WORKER,
                &db.url,
                name,
                &runner_flags(&[("poll-interval-ms", "200")]),
            );
            command.env("RUST_LOG", "debug");
            Proc::spawn(name, command)
        })
        .collect();
    // The queue works around the held rows instead of waiting for them.
    wait_for("work past the held rows", Duration::from_secs(60), || {
        count_where(&mut conn, "status = 'completed'") >= (JOBS as i64) / 2
    });
    let still_pending = diesel::sql_query(
        "SELECT count(*) AS n FROM jobqueue_jobs WHERE status = 'pending' AND id = ANY($1)",
    )
    .bind::<Array<Uuid>, _>(&held)
    .get_result::<N>(&mut conn)
    .expect("count held rows")
    .n;
    assert_eq!(still_pending, HELD, "held rows are skipped, not taken");
    diesel::sql_query("COMMIT")
        .execute(&mut holder)
        .expect("release");

    wait_no_live_jobs(&mut conn, Duration::from_secs(120));
    stop.0.store(true, Ordering::Relaxed);
    let churn = churner.join().expect("the churning session");
    for runner in &runners {
        runner.signal("TERM");
    }
    for runner in &mut runners {
        let status = runner.wait_exit(Duration::from_secs(30));
        assert_exit_0(runner, status);
    }

    let stderr: String = runners.iter().map(Proc::stderr).collect();
    let failed_claims = stderr.matches("claim failed").count();
    let isolation_errors = stderr.matches("could not serialize").count();
    let tally = Tally::of(&mut conn, "test.chaos", "attempt");
    Summary {
        scenario: "8 hostile database",
        jobs: tally.jobs,
        faults: 2 + churn.transactions as i64,
        lost: tally.lost(),
        duplicated: tally.duplicated(),
        detail: format!(
            "default_isolation=serializable held_rows={HELD} churn_transactions={} \
             churn_serialization_failures={} churn_deadlocks={} job_errors={} \
             runner_failed_claims={failed_claims} runner_serialization_errors={isolation_errors}",
            churn.transactions,
            churn.serialization_failures,
            churn.deadlocks,
            count_where(&mut conn, "errors <> '[]'")
        ),
    }
    .print_and_check();
    assert!(
        churn.other_errors.is_empty(),
        "the churning session failed otherwise: {:?}",
        churn.other_errors
    );
    assert_eq!(tally.held, 0);
    assert_eq!(
        isolation_errors, 0,
        "the runners' statements pin READ COMMITTED: {stderr}"
    );
}
