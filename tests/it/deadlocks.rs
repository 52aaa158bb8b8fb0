//! The runner's statements never deadlock with each other: every statement
//! that locks several job rows takes them by id. Completions, lease
//! renewals (every 20 ms), marking jobs running, stale-job recovery and
//! cancels run on overlapping rows under load, and the database's deadlock
//! counter does not move.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use diesel::prelude::*;
use jobqueue_core::engine::rescue_stale;
use jobqueue_core::{JobId, JobOptions, NewJob, cancel, enqueue_many};
use jobqueue_runner::{Runner, RunnerConfig};
use jobqueue_tests::jobs::{self, Sleep};
use jobqueue_tests::{TestDb, count_where, other_sessions, scalar, wait_for, wait_no_live_jobs};

fn deadlocks(conn: &mut PgConnection) -> i64 {
    diesel::sql_query("SELECT pg_stat_clear_snapshot()")
        .execute(conn)
        .expect("clear the stats snapshot");
    scalar(
        conn,
        "SELECT deadlocks AS n FROM pg_stat_database WHERE datname = current_database()",
    )
}

#[derive(QueryableByName)]
struct Id {
    #[diesel(sql_type = diesel::sql_types::Uuid)]
    id: JobId,
}

/// Some held job, if any.
fn some_held(conn: &mut PgConnection) -> Option<JobId> {
    diesel::sql_query(
        "SELECT id FROM jobqueue_jobs WHERE status IN ('claimed', 'running')
         OFFSET floor(random() * 20) LIMIT 1",
    )
    .get_result::<Id>(conn)
    .optional()
    .expect("pick a held job")
    .map(|row| row.id)
}

#[test]
fn completer_lease_keeper_recovery_and_cancels_never_deadlock() {
    const JOBS: u64 = 4000;
    let (db, mut conn) = TestDb::with_side_tables();
    let before = deadlocks(&mut conn);
    let jobs: Vec<NewJob> = (0..JOBS)
        .map(|n| NewJob::from_job(&Sleep { ms: n % 4 }, JobOptions::new().max_attempts(10)))
        .collect::<Result<_, _>>()
        .expect("build");
    enqueue_many(&mut conn, &jobs).expect("enqueue");

    let mut config = RunnerConfig::new(&db.url)
        .keep_completed(jobqueue_tests::KEEP_COMPLETED)
        .concurrency(16)
        .lease(Duration::from_secs(2));
    config.heartbeat_interval = Some(Duration::from_millis(20));
    config.rescue_interval = Duration::from_millis(50);
    config.completion_batch = 200;
    let runners: Vec<_> = (0..2)
        .map(|_| {
            Runner::new(config.clone(), jobs::registry())
                .start()
                .expect("start")
        })
        .collect();

    // Beside the runners: cancel held jobs, expire their leases one at a
    // time (as if their worker froze) and recover them, in a loop.
    let stop = Arc::new(AtomicBool::new(false));
    let meddler = {
        let (url, stop) = (db.url.clone(), Arc::clone(&stop));
        std::thread::spawn(move || {
            let mut conn = PgConnection::establish(&url).expect("connect");
            let mut round = 0u64;
            while !stop.load(Ordering::Relaxed) {
                round += 1;
                if let Some(id) = some_held(&mut conn) {
                    if round.is_multiple_of(3) {
                        cancel(&mut conn, id).expect("cancel");
                    } else {
                        diesel::sql_query(
                            "UPDATE jobqueue_jobs SET lease_expires_at = now() - interval '1 second'
                             WHERE id = $1 AND status IN ('claimed', 'running')",
                        )
                        .bind::<diesel::sql_types::Uuid, _>(id)
                        .execute(&mut conn)
                        .expect("expire a lease");
                    }
                }
                rescue_stale(&mut conn, 100).expect("rescue");
            }
        })
    };
    wait_no_live_jobs(&mut conn, Duration::from_secs(180));
    stop.store(true, Ordering::Relaxed);
    meddler.join().expect("the meddling thread panicked");
    for runner in runners {
        runner.shutdown();
    }
    // The runners' sessions report their statistics as they end.
    wait_for(
        "the runners' sessions ended",
        Duration::from_secs(30),
        || other_sessions(&mut conn) == 0,
    );
    let finished = count_where(&mut conn, "status IN ('completed', 'cancelled', 'failed')");
    assert_eq!(finished, JOBS as i64);
    assert_eq!(
        deadlocks(&mut conn) - before,
        0,
        "the database detected deadlocks between the runner's statements"
    );
}
