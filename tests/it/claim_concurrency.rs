//! Many claimers at once: every job claimed exactly once, none missed.

use std::collections::HashSet;
use std::sync::{Arc, Barrier};

use diesel::prelude::*;
use jobqueue_core::engine::{Claim, claim, complete_many};
use jobqueue_core::{JobId, JobOptions, NewJob, enqueue_many};
use jobqueue_tests::{TestDb, count_where};

const JOBS: usize = 20_000;
const THREADS: usize = 8;

fn seed(conn: &mut PgConnection) -> HashSet<JobId> {
    let jobs: Vec<NewJob> = (0..JOBS)
        .map(|i| {
            NewJob::new(
                "noop",
                &format!("{{\"i\":{i}}}"),
                JobOptions::new().priority((i % 5) as i32),
            )
        })
        .collect::<Result<_, _>>()
        .expect("build");
    let done = enqueue_many(conn, &jobs).expect("enqueue");
    done.inserted.into_iter().collect()
}

fn claim_all(url: &str) -> Vec<Vec<JobId>> {
    let barrier = Arc::new(Barrier::new(THREADS));
    let handles: Vec<_> = (0..THREADS)
        .map(|t| {
            let url = url.to_owned();
            let barrier = Arc::clone(&barrier);
            std::thread::spawn(move || {
                let mut conn = PgConnection::establish(&url).expect("connect");
                let request = Claim::new(format!("w{t}")).limit(37);
                let mut mine = Vec::new();
                barrier.wait();
                loop {
                    let rows = claim(&mut conn, &request).expect("claim");
                    if rows.is_empty() {
                        break;
                    }
                    let leases: Vec<_> = rows.iter().map(|r| r.lease()).collect();
                    let done = complete_many(&mut conn, &leases).expect("complete");
                    assert!(done.lost.is_empty(), "lost leases: {:?}", done.lost);
                    mine.extend(rows.iter().map(|r| r.id));
                }
                mine
            })
        })
        .collect();
    handles
        .into_iter()
        .map(|h| h.join().expect("claimer thread"))
        .collect()
}

fn check(per_thread: Vec<Vec<JobId>>, expected: &HashSet<JobId>) {
    let total: usize = per_thread.iter().map(Vec::len).sum();
    let unique: HashSet<JobId> = per_thread.iter().flatten().copied().collect();
    assert_eq!(
        total, JOBS,
        "claims in all (a job claimed twice shows up here)"
    );
    assert_eq!(unique.len(), JOBS, "distinct jobs claimed");
    assert_eq!(&unique, expected, "claimed exactly the enqueued jobs");
    let busy = per_thread.iter().filter(|v| !v.is_empty()).count();
    assert!(
        busy > 1,
        "only {busy} thread(s) got work: claims did not run concurrently"
    );
}

#[test]
fn eight_claimers_take_every_job_exactly_once() {
    let db = TestDb::new();
    let expected = seed(&mut db.conn());
    let per_thread = claim_all(&db.url);
    check(per_thread, &expected);
    let mut conn = db.conn();
    assert_eq!(
        count_where(&mut conn, "status = 'completed' AND attempts = 1"),
        JOBS as i64
    );
    assert_eq!(count_where(&mut conn, "status <> 'completed'"), 0);
}

#[test]
fn claims_work_when_the_database_defaults_to_serializable() {
    let (db, mut conn) = TestDb::connected();
    let name: String = db.url.rsplit('/').next().expect("db name").to_owned();
    diesel::sql_query(format!(
        "ALTER DATABASE {name} SET default_transaction_isolation = 'serializable'"
    ))
    .execute(&mut conn)
    .expect("alter database");
    drop(conn);
    let expected = seed(&mut db.conn());
    let per_thread = claim_all(&db.url);
    check(per_thread, &expected);
}
