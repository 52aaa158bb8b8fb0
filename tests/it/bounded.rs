//! Work bounded by what a statement looks at, not by what is live: the
//! sweeps of keys and of workflow ends read a page per statement, a runner
//! of named queues reads the new keyed jobs of its queues alone, and a
//! claim of every queue locks only the limited queues it takes from. Each
//! test counts what the statement read (the rows and index entries its
//! transaction got back from `jobqueue_jobs`, `pg_stat_get_xact_tuples_returned`,
//! with no parallel workers, whose reads this session would not count) or
//! holds a lock the statement used to wait for.

use std::time::Duration;

use diesel::prelude::*;
use jobqueue_core::engine::{Claim, admit_new, claim, settle_ended_page, sweep_keys};
use jobqueue_core::{JobId, RateLimit, Workflow, set_queue_rate_limit};
use jobqueue_runner::RunnerConfig;
use jobqueue_runner::maintenance::{AdmitKeys, Service, ServiceContext};
use jobqueue_tests::jobs::{StepJob, registry};
use jobqueue_tests::{TestDb, counting, exec, scalar};

/// `n` jobs of `queue` waiting for room, spread over `keys` keys, looked at
/// by an admission (`key_checked`) or not; each key held by a scheduled job
/// (a holder) so that none has room under a key limit of 1.
fn waiting_jobs(conn: &mut PgConnection, queue: &str, n: usize, keys: usize, checked: bool) {
    exec(
        conn,
        &format!(
            "INSERT INTO jobqueue_queues (name, key_limit) VALUES ('{queue}', 1)
                 ON CONFLICT (name) DO UPDATE SET key_limit = 1;
             INSERT INTO jobqueue_jobs (id, job_type, queue, status, concurrency_key, run_at)
             SELECT gen_random_uuid(), 'noop', '{queue}', 'scheduled', '{queue}-' || k,
                    now() + interval '1 hour'
             FROM generate_series(0, {keys} - 1) AS k
             WHERE NOT EXISTS (SELECT 1 FROM jobqueue_jobs AS h
                               WHERE h.queue = '{queue}' AND h.concurrency_key = '{queue}-' || k
                                 AND h.status = 'scheduled');
             INSERT INTO jobqueue_jobs
                 (id, job_type, queue, status, concurrency_key, key_checked, run_at)
             SELECT gen_random_uuid(), 'noop', '{queue}', 'waiting', '{queue}-' || (i % {keys}),
                    {checked}, now() - interval '1 minute'
             FROM generate_series(1, {n}) AS i;
             ANALYZE jobqueue_jobs;"
        ),
    );
}

/// A sweep of keys looks at each key with one index descent: 20 keys with
/// 10,000 waiting jobs cost tens of index entries, where a grouping of the
/// waiting jobs by key read all 10,000 (from the index or the table).
#[test]
fn a_sweep_of_keys_reads_its_keys_not_their_lines() {
    let db = TestDb::new();
    let mut conn = db.conn();
    waiting_jobs(&mut conn, "keyed", 10_000, 20, true);
    let (sweep, read) = counting(&mut conn, |conn| {
        sweep_keys(conn, &[], None, 1000).expect("sweep")
    });
    assert_eq!((sweep.keys, sweep.admitted), (20, 0), "{sweep:?}");
    assert!(sweep.next.is_none());
    assert!(
        read <= 100,
        "a sweep of 20 keys read {read} rows and index entries (their lines hold 10,000 jobs)"
    );
    // A page of 7 keys, then the rest from where it stopped.
    let first = sweep_keys(&mut conn, &["keyed".to_owned()], None, 7).expect("a page");
    let next = first.next.clone().expect("a full page goes on");
    let rest = sweep_keys(&mut conn, &["keyed".to_owned()], Some(&next), 1000).expect("the rest");
    assert_eq!((first.keys, rest.keys), (7, 13));
}

/// A runner of queue `a` reads the new keyed jobs of `a` alone: not the
/// 5,000 new jobs of another queue (read past through an index by due
/// time), nor the 2,000 jobs of `a` that an admission already looked at
/// (read through the index of waiting jobs by key).
#[test]
fn new_keyed_jobs_of_named_queues_are_read_without_other_queues_jobs() {
    let db = TestDb::new();
    let mut conn = db.conn();
    waiting_jobs(&mut conn, "a", 2_000, 10, true);
    waiting_jobs(&mut conn, "other", 5_000, 10, false);
    exec(
        &mut conn,
        "INSERT INTO jobqueue_jobs (id, job_type, queue, status, concurrency_key, run_at)
         SELECT gen_random_uuid(), 'noop', 'a', 'waiting', 'fresh-' || i, now()
         FROM generate_series(1, 3) AS i",
    );
    let (page, read) = counting(&mut conn, |conn| {
        admit_new(conn, &["a".to_owned()], None, 1000).expect("admit")
    });
    assert_eq!((page.looked, page.admitted), (3, 3), "{page:?}");
    assert!(
        read <= 60,
        "looking at 3 new jobs of `a` read {read} rows and index entries"
    );
}

/// The sweep of workflow ends reads a page of live steps per statement and
/// goes on from the page's last step: three of 2,500 steps cancelled
/// without being settled are settled by the pages they fall in, never a
/// page longer than asked for.
#[test]
fn the_sweep_of_workflow_ends_goes_page_by_page() {
    let db = TestDb::new();
    let mut conn = db.conn();
    let mut flow = Workflow::new("wide").expect("workflow");
    let mut ids: Vec<JobId> = (0..2_500)
        .map(|n| {
            let job = StepJob {
                n,
                ms: 0,
                fail: false,
            };
            flow.add(format!("s{n}"), &job).expect("step").id()
        })
        .collect();
    flow.enqueue(&mut conn).expect("enqueue");
    ids.sort();
    let cancelled = [ids[0], ids[1_250], ids[2_499]];
    for id in cancelled {
        exec(
            &mut conn,
            &format!(
                "UPDATE jobqueue_jobs SET status = 'cancelled', finished_at = now()
                 WHERE id = '{id}'"
            ),
        );
    }
    let mut after = None;
    let mut pages = Vec::new();
    loop {
        let page = settle_ended_page(&mut conn, after, 1000, None).expect("a page");
        assert!(page.looked <= 1000, "{page:?}");
        pages.push((page.looked, page.ended));
        after = page.next;
        if after.is_none() {
            break;
        }
    }
    assert_eq!(pages, vec![(1000, 1), (1000, 1), (500, 1)]);
    let ended = scalar(
        &mut conn,
        "SELECT count(*) AS n FROM jobqueue_workflow_steps WHERE state = 'cancelled'",
    );
    assert_eq!(ended, 3);
    // A job that ended lately is settled by the next page whatever the
    // place of its step: the page looks at what ended lately too.
    let late = ids[2_000];
    exec(
        &mut conn,
        &format!(
            "UPDATE jobqueue_jobs SET status = 'failed', finished_at = now() WHERE id = '{late}'"
        ),
    );
    let page =
        settle_ended_page(&mut conn, None, 10, Some(Duration::from_secs(60))).expect("a page");
    assert_eq!((page.looked, page.ended), (10, 1), "{page:?}");
}

/// A claim of every queue takes from the queues its walk reaches and locks
/// no other limited queue's row: with a rate-limited queue's row held by
/// another session, a claim of one job that the walk finds in `a_plain`
/// returns at once (it used to lock every limited queue with due jobs, in
/// name order, and waited).
#[test]
fn a_claim_of_every_queue_waits_for_no_limited_queue_it_does_not_take_from() {
    let db = TestDb::new();
    let mut conn = db.conn();
    exec(
        &mut conn,
        "INSERT INTO jobqueue_queues (name) VALUES ('a_plain'), ('z_rated');
         INSERT INTO jobqueue_jobs (id, job_type, queue)
         SELECT gen_random_uuid(), 'noop', q FROM unnest(ARRAY['a_plain', 'z_rated']) AS q",
    );
    let limit = RateLimit::new(100, Duration::from_secs(1)).expect("a limit");
    set_queue_rate_limit(&mut conn, "z_rated", Some(limit)).expect("set the limit");
    let mut locker = db.conn();
    exec(
        &mut locker,
        "BEGIN; SELECT 1 FROM jobqueue_queues WHERE name = 'z_rated' FOR UPDATE",
    );
    // A claim that waited for the held row fails here instead of hanging.
    exec(&mut conn, "SET lock_timeout = '5s'");
    let rows = claim(&mut conn, &Claim::new("w").limit(1)).expect("a claim that does not wait");
    assert_eq!(rows.len(), 1);
    assert_eq!(rows[0].queue, "a_plain");
    exec(&mut locker, "ROLLBACK");
    // With the row free, the next claim walks on to the rated queue.
    let mut next = Claim::new("w").limit(1);
    next.rotate(&rows);
    let rows = claim(&mut conn, &next).expect("claim");
    assert_eq!(rows.len(), 1);
    assert_eq!(rows[0].queue, "z_rated");
}

/// The sweep of a runner's maintenance looks at 250 keys per pass at
/// most, and the next pass goes on from there: 600 keys with waiting jobs
/// are swept over three passes, never all in one.
#[test]
fn a_maintenance_pass_sweeps_a_bounded_part_of_the_keys() {
    let db = TestDb::new();
    let mut conn = db.conn();
    waiting_jobs(&mut conn, "keyed", 600, 600, true);
    let config = RunnerConfig::new(&db.url).queues(["keyed"]);
    let mut service = AdmitKeys::new(&config);
    let mut cx = ServiceContext::new(config, registry()).expect("a service context");
    let swept: Vec<usize> = (0..3)
        .map(|_| service.run_once(&mut cx).expect("a pass").keys_swept)
        .collect();
    assert_eq!(swept, [250, 250, 100]);
    // The sweep reached the last key: the next starts after `rescue_interval`.
    let third = service.run_once(&mut cx).expect("a pass");
    assert_eq!(third.keys_swept, 0);
}

/// Claims of every queue, each going on after the last queue the one
/// before took from, take every job of 50 rate-limited queues whose limits
/// do not bind.
#[test]
fn claims_of_every_queue_go_round_rate_limited_queues() {
    let db = TestDb::new();
    let mut conn = db.conn();
    exec(
        &mut conn,
        "INSERT INTO jobqueue_queues (name)
         SELECT 'tenant-' || lpad(t::text, 3, '0') FROM generate_series(1, 50) AS t;
         INSERT INTO jobqueue_jobs (id, job_type, queue)
         SELECT gen_random_uuid(), 'noop', 'tenant-' || lpad(t::text, 3, '0')
         FROM generate_series(1, 50) AS t, generate_series(1, 2) AS j",
    );
    let limit = RateLimit::new(1_000, Duration::from_secs(1)).expect("a limit");
    for t in 1..=50 {
        set_queue_rate_limit(&mut conn, &format!("tenant-{t:03}"), Some(limit)).expect("limit");
    }
    let mut next = Claim::new("w").limit(8);
    let mut taken = 0;
    for _ in 0..40 {
        let rows = claim(&mut conn, &next).expect("claim");
        taken += rows.len();
        next.rotate(&rows);
        if taken == 100 {
            break;
        }
    }
    assert_eq!(taken, 100);
}
