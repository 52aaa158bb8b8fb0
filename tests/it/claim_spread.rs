//! How a claim spreads over many queues, and what it does with jobs of
//! types its claimer has no handler for: a claim of every queue reads as
//! many queues as its limit and claims after it go round them all; jobs of
//! other types are set aside by the claim itself, and a queue's backlog of
//! such a type by the set-aside service, a batch per pass.

use std::collections::BTreeSet;
use std::time::Duration;

use chrono::Utc;
use diesel::connection::SimpleConnection;
use jobqueue_core::engine::{Claim, MAX_CLAIM_QUEUES, claim};
use jobqueue_core::{JobOptions, JobStatus};
use jobqueue_runner::RunnerConfig;
use jobqueue_runner::maintenance::{Service, ServiceContext, SetAsideBacklogs, SetAsideReport};
use jobqueue_tests::{TestDb, count_where, put, read_job, start_runner, wait_count};
use jobqueue_tools::bench::registry;

/// Jobs of queue `tenant-NNN` for each of `queues` queues, `each` a queue,
/// in one statement.
fn spread(conn: &mut diesel::PgConnection, queues: usize, each: usize) {
    conn.batch_execute(&format!(
        "INSERT INTO jobqueue_jobs (id, job_type, queue, status, payload)
         SELECT gen_random_uuid(), 't', format('tenant-%s', lpad(q::text, 3, '0')),
                'pending', '{{}}'
         FROM generate_series(0, {}) AS q, generate_series(1, {each})",
        queues - 1
    ))
    .expect("insert");
}

fn queues_of(rows: &[jobqueue_core::JobRow]) -> Vec<String> {
    let mut queues: Vec<String> = rows.iter().map(|row| row.queue.clone()).collect();
    queues.sort();
    queues
}

#[test]
fn a_claim_of_every_queue_reads_as_many_queues_as_its_limit_and_claims_go_round() {
    let (_db, mut conn) = TestDb::connected();
    spread(&mut conn, 300, 2);
    let mut claim_of_all = Claim::new("w").limit(10);
    let first = claim(&mut conn, &claim_of_all).expect("claim");
    // One job from each of the first ten queues: the walk stopped there.
    let expected: Vec<String> = (0..10).map(|q| format!("tenant-{q:03}")).collect();
    assert_eq!(queues_of(&first), expected);
    claim_of_all.rotate(&first);
    assert_eq!(claim_of_all.start_after, "tenant-009");
    // The next claims go on after it, round every queue, and wrap around.
    let mut seen: BTreeSet<String> = first.iter().map(|row| row.queue.clone()).collect();
    for _ in 0..29 {
        let rows = claim(&mut conn, &claim_of_all).expect("claim");
        assert_eq!(rows.len(), 10);
        for row in &rows {
            assert!(seen.insert(row.queue.clone()), "{} twice", row.queue);
        }
        claim_of_all.rotate(&rows);
    }
    assert_eq!(seen.len(), 300, "every queue once in 30 claims");
    let wrapped = claim(&mut conn, &claim_of_all).expect("claim");
    assert_eq!(queues_of(&wrapped), expected, "round again from the first");
}

#[test]
fn a_large_claim_takes_larger_shares_of_at_most_max_claim_queues_queues() {
    let (_db, mut conn) = TestDb::connected();
    spread(&mut conn, 300, 3);
    let rows = claim(&mut conn, &Claim::new("w").limit(250)).expect("claim");
    let queues: BTreeSet<String> = rows.iter().map(|row| row.queue.clone()).collect();
    // The walk stopped at 100 queues, each with a share of ceil(250 / 100)
    // = 3 (all it has): the limit is reached within the first 84.
    assert_eq!(rows.len(), 250);
    assert_eq!(queues.len(), 250_usize.div_ceil(3));
    let walked = format!("tenant-{:03}", MAX_CLAIM_QUEUES - 1);
    assert!(queues.iter().all(|queue| *queue <= walked), "{queues:?}");
    // A limit above what 100 queues hold: 100 queues, all each has.
    let (_db, mut conn) = TestDb::connected();
    spread(&mut conn, 300, 3);
    let rows = claim(&mut conn, &Claim::new("w").limit(1000)).expect("claim");
    let queues: BTreeSet<String> = rows.iter().map(|row| row.queue.clone()).collect();
    assert_eq!(queues.len() as i64, MAX_CLAIM_QUEUES);
    assert_eq!(rows.len() as i64, 3 * MAX_CLAIM_QUEUES);
}

#[test]
fn the_walk_wraps_around_and_skips_paused_queues_without_counting_them() {
    let (_db, mut conn) = TestDb::connected();
    spread(&mut conn, 6, 1);
    jobqueue_core::pause_queue(&mut conn, "tenant-004").expect("pause");
    // Starting after tenant-003: tenant-005 (tenant-004 is paused), then
    // round to tenant-000 and tenant-001.
    let mut late = Claim::new("w").limit(3);
    late.start_after = "tenant-003".into();
    let rows = claim(&mut conn, &late).expect("claim");
    assert_eq!(queues_of(&rows), ["tenant-000", "tenant-001", "tenant-005"]);
    late.rotate(&rows);
    assert_eq!(
        late.start_after, "tenant-001",
        "the last queue taken, in the claim's order"
    );
    let rest = claim(&mut conn, &late).expect("claim");
    assert_eq!(queues_of(&rest), ["tenant-002", "tenant-003"]);
    late.rotate(&[]);
    assert_eq!(
        late.start_after, "",
        "a claim that took nothing starts the next at the first"
    );
}

#[test]
fn a_claim_sets_aside_the_jobs_of_types_it_has_no_handler_for() {
    let (_db, mut conn) = TestDb::connected();
    let now = Utc::now();
    let at = |seconds: i64| JobOptions::new().run_at(now - chrono::Duration::seconds(60 - seconds));
    let known = [
        put(&mut conn, "known", at(1)),
        put(&mut conn, "known", at(3)),
    ];
    let unknown = [
        put(&mut conn, "unknown", at(2)),
        put(&mut conn, "unknown", at(4)),
    ];
    let rows = claim(
        &mut conn,
        &Claim::new("runner-a").limit(10).handled_types(["known"]),
    )
    .expect("claim");
    let status_of = |id| rows.iter().find(|row| row.id == id).map(|row| row.status);
    for id in known {
        assert_eq!(status_of(id), Some(JobStatus::Claimed));
        assert_eq!(read_job(&mut conn, id).attempts, 1);
    }
    for id in unknown {
        assert_eq!(status_of(id), Some(JobStatus::Unhandled));
        let row = read_job(&mut conn, id);
        assert_eq!((row.status, row.attempts), (JobStatus::Unhandled, 0));
        let error = row.last_error.expect("an error saying why");
        assert!(
            error.contains("runner-a") && error.contains("unknown"),
            "{error}"
        );
    }
    // Without handled types, a claim takes every type.
    let again = put(&mut conn, "unknown", JobOptions::new());
    let rows = claim(&mut conn, &Claim::new("w").limit(10)).expect("claim");
    assert_eq!(rows.iter().map(|row| row.id).collect::<Vec<_>>(), [again]);
}

/// A context for passes on `db`.
fn context(db: &TestDb) -> ServiceContext {
    ServiceContext::new(RunnerConfig::new(&db.url), registry()).expect("a service context")
}

#[test]
fn the_set_aside_service_walks_a_queue_s_backlog_of_one_type_in_batches() {
    let db = TestDb::new();
    let mut conn = db.conn();
    // 12,000 jobs of a type nobody handles in `mail`, with handled jobs
    // among them and the same type in another queue.
    conn.batch_execute(
        "INSERT INTO jobqueue_jobs (id, job_type, queue, status, payload, run_at, priority)
         SELECT gen_random_uuid(),
                CASE WHEN g % 1000 = 0 THEN 'bench.noop' ELSE 'new.type' END,
                'mail', 'pending', '{}', now() - interval '1 hour' + g * interval '1 ms',
                CASE WHEN g > 11000 THEN 50 ELSE 100 END
         FROM generate_series(1, 12012) AS g;
         INSERT INTO jobqueue_jobs (id, job_type, queue, status, payload)
         SELECT gen_random_uuid(), 'new.type', 'other', 'pending', '{}'
         FROM generate_series(1, 10);",
    )
    .expect("insert");
    let mut cx = context(&db);
    let mut service = SetAsideBacklogs::new(cx.config());
    assert_eq!(
        service.run_once(&mut cx).expect("pass"),
        SetAsideReport::Idle
    );
    service.walk("mail", "new.type");
    let mut passes = Vec::new();
    loop {
        let report = service.run_once(&mut cx).expect("pass");
        let SetAsideReport::Walked { jobs, done, .. } = report else {
            panic!("{report}")
        };
        passes.push(jobs);
        assert_eq!(service.next_after(&report).is_zero(), !done, "{report}");
        if done {
            break;
        }
    }
    // Batches of 5,000 over both priorities, in claim order.
    assert_eq!(passes, [5000, 5000, 2000]);
    assert_eq!(
        count_where(
            &mut conn,
            "job_type = 'new.type' AND status = 'unhandled' AND queue = 'mail'"
        ),
        12000
    );
    assert_eq!(
        count_where(&mut conn, "job_type = 'bench.noop' AND status = 'pending'"),
        12
    );
    assert_eq!(
        count_where(&mut conn, "queue = 'other' AND status = 'pending'"),
        10
    );
    assert_eq!(
        service.run_once(&mut cx).expect("pass"),
        SetAsideReport::Idle
    );
}

#[test]
fn a_runner_sets_aside_a_backlog_of_a_type_it_has_no_handler_for_and_works_the_rest() {
    let db = TestDb::new();
    let mut conn = db.conn();
    // The unhandled type's backlog is older: claims meet it first.
    conn.batch_execute(
        "INSERT INTO jobqueue_jobs (id, job_type, queue, status, payload, run_at)
         SELECT gen_random_uuid(), 'new.type', 'mail', 'pending', '{}',
                now() - interval '1 hour' + g * interval '1 ms'
         FROM generate_series(1, 12000) AS g;
         INSERT INTO jobqueue_jobs (id, job_type, queue, status, payload, run_at)
         SELECT gen_random_uuid(), 'bench.noop', 'mail', 'pending', '{\"seq\": 0}',
                now() - interval '1 minute' + g * interval '1 ms'
         FROM generate_series(1, 50) AS g;",
    )
    .expect("insert");
    let mut config = RunnerConfig::new(&db.url).concurrency(4);
    config.poll_interval = Duration::from_millis(200);
    let runner = start_runner(config, registry());
    wait_count(&mut conn, "job_type = 'bench.noop'", 0);
    wait_count(
        &mut conn,
        "job_type = 'new.type' AND status = 'unhandled' AND attempts = 0",
        12000,
    );
    let stats = runner.shutdown().stats;
    // Set-aside jobs are not claimed: the claims counted only the others.
    assert_eq!((stats.completed, stats.claimed), (50, 50));
    assert!(stats.unhandled >= 1, "claims met the type first: {stats:?}");
}
