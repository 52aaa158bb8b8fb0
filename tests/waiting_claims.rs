//! Claims of waiting keyed jobs straight from their keys' lines
//! (`engine::claim_waiting`): what an admission followed by a claim would
//! take, in one write per job. Up to each key's room and no further, even
//! with four claimers racing; a line the claim's size cuts is taken up by
//! the next claim; and what a runner would not claim so (paused and
//! ordered queues, types it has no handler for) is admitted instead.

use diesel::prelude::*;
use jobqueue_core::engine::{Claim, QueueKey, admit_keys, admit_new_unclaimable, claim_waiting};
use jobqueue_core::{JobRow, JobStatus, KeyLimit, enqueue_many, pause_queue};
use jobqueue_tests::jobs::{Noop, Sleep};
use jobqueue_tests::keys::{keyed, limit_queue};
use jobqueue_tests::{TestDb, count_where, scalar};

/// A claim of queue `queue`'s waiting jobs, up to `limit`.
fn claim_of(queue: &str, limit: i64) -> Claim {
    Claim::new("lines-test").queues([queue]).limit(limit)
}

/// The keys of `rows`, one entry per row, sorted.
fn keys_of(rows: &[JobRow]) -> Vec<String> {
    let mut keys: Vec<String> = rows
        .iter()
        .map(|row| row.concurrency_key.clone().expect("a keyed job"))
        .collect();
    keys.sort();
    keys
}

#[test]
fn a_claim_takes_each_keys_oldest_jobs_up_to_its_room_and_no_more() {
    let (_db, mut conn) = TestDb::connected();
    limit_queue(&mut conn, "lines", KeyLimit::per_key(2).expect("limit"));
    // Key a: 5 jobs, b: 1, c: 3, interleaved in one batch.
    let order = ["a", "b", "a", "c", "a", "c", "a", "c", "a"];
    let jobs = keyed(
        order.len(),
        "lines",
        |i| Noop { n: i as u64 },
        |i| order[i].to_owned(),
    );
    let ids = enqueue_many(&mut conn, &jobs).expect("enqueue");
    assert_eq!(count_where(&mut conn, "status = 'waiting'"), 9);

    let rows = claim_waiting(&mut conn, &claim_of("lines", 10)).expect("claim");
    assert_eq!(keys_of(&rows), ["a", "a", "b", "c", "c"]);
    assert!(rows.iter().all(|row| row.status == JobStatus::Claimed
        && row.attempts == 1
        && row.worker_id.as_deref() == Some("lines-test")));
    // Each key's oldest jobs: a's first two, c's first two.
    let claimed: Vec<_> = rows.iter().map(|row| row.id).collect();
    for i in [0, 1, 2, 3, 5] {
        assert!(
            claimed.contains(&ids.inserted[i]),
            "job {i} ({}) claimed",
            order[i]
        );
    }
    assert_eq!(count_where(&mut conn, "status = 'waiting'"), 4);

    // No key has room: nothing more, however often asked.
    for _ in 0..3 {
        let rows = claim_waiting(&mut conn, &claim_of("lines", 10)).expect("claim");
        assert!(rows.is_empty(), "claimed {rows:?} past a key's limit");
    }

    // One of a's jobs completes: its key's admission makes the next due.
    let a = rows_of(&rows, "a");
    jobqueue_core::engine::complete(&mut conn, &a[0].lease()).expect("complete");
    let admitted = admit_keys(
        &mut conn,
        &[QueueKey {
            queue: "lines".into(),
            key: "a".into(),
        }],
    )
    .expect("admit");
    assert_eq!(admitted, 1);
    assert_eq!(
        count_where(&mut conn, "concurrency_key = 'a' AND status = 'pending'"),
        1
    );
}

/// The rows of `rows` with key `key`.
fn rows_of<'a>(rows: &'a [JobRow], key: &str) -> Vec<&'a JobRow> {
    rows.iter()
        .filter(|row| row.concurrency_key.as_deref() == Some(key))
        .collect()
}

#[test]
fn a_line_the_claims_size_cuts_is_taken_up_by_the_next_claim() {
    let (_db, mut conn) = TestDb::connected();
    limit_queue(&mut conn, "lines", KeyLimit::per_key(10).expect("limit"));
    enqueue_many(
        &mut conn,
        &keyed(6, "lines", |i| Noop { n: i as u64 }, |_| "a".to_owned()),
    )
    .expect("enqueue");
    let first = claim_waiting(&mut conn, &claim_of("lines", 4)).expect("claim");
    assert_eq!(first.len(), 4);
    // The rest of a's line is within its room: the next claim finds it,
    // without waiting for one of the four to finish.
    let second = claim_waiting(&mut conn, &claim_of("lines", 4)).expect("claim");
    assert_eq!(second.len(), 2, "the rest of the line");
    let mut ids: Vec<_> = first.iter().chain(&second).map(|row| row.id).collect();
    let in_order = ids.windows(2).all(|w| w[0] < w[1]);
    assert!(in_order, "the line is taken oldest first");
    ids.dedup();
    assert_eq!(ids.len(), 6);
    assert_eq!(count_where(&mut conn, "status = 'waiting'"), 0);
}

#[test]
fn four_racing_claimers_never_take_more_than_a_keys_limit() {
    const KEYS: usize = 300;
    let (db, mut conn) = TestDb::connected();
    limit_queue(&mut conn, "race", KeyLimit::per_key(2).expect("limit"));
    // Three jobs per key, in three batches: each key's line.
    for round in 0..3 {
        let jobs = keyed(KEYS, "race", |_| Noop { n: round }, |i| format!("k{i}"));
        enqueue_many(&mut conn, &jobs).expect("enqueue");
    }
    let claimers: Vec<_> = (0..4)
        .map(|c| {
            let url = db.url.clone();
            std::thread::spawn(move || {
                let mut conn = PgConnection::establish(&url).expect("connect");
                let claim = Claim::new(format!("racer-{c}")).queues(["race"]).limit(7);
                let mut got = 0;
                loop {
                    let rows = claim_waiting(&mut conn, &claim).expect("claim");
                    if rows.is_empty() {
                        return got;
                    }
                    got += rows.len();
                }
            })
        })
        .collect();
    let got: usize = claimers
        .into_iter()
        .map(|t| t.join().expect("a claimer"))
        .sum();
    let most = scalar(
        &mut conn,
        "SELECT max(n) AS n FROM (SELECT count(*) AS n FROM jobqueue_jobs
          WHERE status = 'claimed' GROUP BY concurrency_key) AS per_key",
    );
    eprintln!("4 claimers took {got} jobs of {KEYS} keys; most of one key: {most}");
    assert_eq!(most, 2, "a key held past its limit");
    assert_eq!(got, 2 * KEYS, "every key's room filled");
    assert_eq!(count_where(&mut conn, "status = 'waiting'"), KEYS as i64);
}

#[test]
fn what_a_runner_would_not_claim_from_the_lines_is_admitted_instead() {
    let (_db, mut conn) = TestDb::connected();
    limit_queue(&mut conn, "paused", KeyLimit::per_key(1).expect("limit"));
    limit_queue(&mut conn, "ordered", KeyLimit::ordered());
    limit_queue(&mut conn, "open", KeyLimit::per_key(1).expect("limit"));
    pause_queue(&mut conn, "paused").expect("pause");
    let mut jobs = keyed(2, "paused", |i| Noop { n: i as u64 }, |i| format!("p{i}"));
    jobs.extend(keyed(
        2,
        "ordered",
        |i| Noop { n: i as u64 },
        |i| format!("o{i}"),
    ));
    // Open queue: one job of a handled type, one of a type the claimer
    // has no handler for.
    jobs.extend(keyed(
        1,
        "open",
        |_| Noop { n: 0 },
        |_| "handled".to_owned(),
    ));
    jobs.extend(keyed(
        1,
        "open",
        |_| Sleep { ms: 1 },
        |_| "other".to_owned(),
    ));
    enqueue_many(&mut conn, &jobs).expect("enqueue");
    let claim = Claim::new("lines-test")
        .handled_types([<Noop as jobqueue_core::Job>::JOB_TYPE])
        .limit(10);

    // The claim of waiting jobs takes only the open queue's handled one.
    let rows = claim_waiting(&mut conn, &claim).expect("claim");
    assert_eq!(keys_of(&rows), ["handled"]);

    // The rest is the admission's: each key has room.
    let (admitted, looked) = admit_new_unclaimable(&mut conn, &claim, 100).expect("admit");
    assert_eq!((admitted, looked), (5, 5));
    let left = scalar(
        &mut conn,
        "SELECT count(*) AS n FROM jobqueue_jobs WHERE status = 'waiting'",
    );
    assert_eq!(left, 0);
}

#[test]
fn jobs_of_other_types_behind_a_claimed_head_are_admitted_and_their_queue_woken() {
    let (db, mut conn) = TestDb::connected();
    limit_queue(&mut conn, "mixed", KeyLimit::per_key(2).expect("limit"));
    let mut listener = db.conn();
    let channel = jobqueue_core::engine::NOTIFY_CHANNEL;
    jobqueue_tests::exec(&mut listener, &format!("LISTEN \"{channel}\""));
    // Key a: a Noop at the head, then a Sleep, then another Noop.
    let mut jobs = keyed(1, "mixed", |_| Noop { n: 0 }, |_| "a".to_owned());
    jobs.extend(keyed(1, "mixed", |_| Sleep { ms: 1 }, |_| "a".to_owned()));
    jobs.extend(keyed(1, "mixed", |_| Noop { n: 1 }, |_| "a".to_owned()));
    enqueue_many(&mut conn, &jobs).expect("enqueue");
    // Drop the enqueue's own notifications.
    jobqueue_tests::exec(&mut listener, "SELECT 1");
    let _ = listener.notifications_iter().count();

    let claim = Claim::new("lines-test")
        .handled_types([<Noop as jobqueue_core::Job>::JOB_TYPE])
        .limit(10);
    let rows = claim_waiting(&mut conn, &claim).expect("claim");
    // The key's room is two: the head claimed, the Sleep behind it
    // admitted for a runner that has its handler, the last Noop waits.
    assert_eq!(rows.len(), 1);
    assert_eq!(rows[0].job_type, <Noop as jobqueue_core::Job>::JOB_TYPE);
    assert_eq!(
        count_where(&mut conn, "job_type = 'test.sleep' AND status = 'pending'"),
        1
    );
    assert_eq!(
        count_where(&mut conn, "concurrency_key = 'a' AND status = 'waiting'"),
        1
    );
    jobqueue_tests::exec(&mut listener, "SELECT 1");
    let woken: Vec<String> = listener
        .notifications_iter()
        .map(|n| n.expect("a notification").payload)
        .collect();
    assert_eq!(woken, ["mixed"], "the admitted job's queue woken");
}
