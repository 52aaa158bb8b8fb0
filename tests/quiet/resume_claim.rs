//! Claims that resume where an earlier claim of the queue stopped: what
//! they take, what they leave for a claim from the start, and what they
//! read while a long transaction holds the xmin horizon.

use diesel::connection::SimpleConnection;
use diesel::prelude::*;
use jobqueue_core::engine::{Claim, QueueSession, Resume, claim};
use jobqueue_core::{JobId, JobOptions, JobRow, NewJob, enqueue_many};
use jobqueue_tests::jobs::Noop;
use jobqueue_tests::{TestDb, autovacuum_off};

/// Enqueues `n` no-op jobs in `queue` at `priority`, due at `run_at`
/// seconds from now (negative: in the past); returns their ids in order.
fn put_many(
    conn: &mut PgConnection,
    n: usize,
    queue: &str,
    priority: i32,
    due_in_secs: f64,
) -> Vec<JobId> {
    let run_at = chrono::Utc::now() + chrono::Duration::milliseconds((due_in_secs * 1e3) as i64);
    put_at(conn, n, queue, priority, run_at)
}

/// Enqueues `n` no-op jobs in `queue` at `priority`, due at `run_at`.
fn put_at(
    conn: &mut PgConnection,
    n: usize,
    queue: &str,
    priority: i32,
    run_at: chrono::DateTime<chrono::Utc>,
) -> Vec<JobId> {
    let jobs: Vec<NewJob> = (0..n)
        .map(|_| {
            NewJob::from_job(
                &Noop { n: 0 },
                JobOptions::new()
                    .queue(queue)
                    .priority(priority)
                    .run_at(run_at),
            )
            .expect("job")
        })
        .collect();
    enqueue_many(conn, &jobs).expect("enqueue").inserted
}

/// Index entries the fetch index has returned to this session's scans and
/// all others' (the statistics, with this session's flushed first).
fn entries_read(conn: &mut PgConnection) -> i64 {
    conn.batch_execute("SELECT pg_stat_force_next_flush(); SELECT pg_stat_clear_snapshot()")
        .expect("flush the statistics");
    jobqueue_tests::scalar(
        conn,
        "SELECT idx_tup_read AS n FROM pg_stat_user_indexes \
         WHERE indexrelname = 'jobqueue_jobs_fetch_idx'",
    )
}

fn ids(rows: &[JobRow]) -> Vec<JobId> {
    rows.iter().map(|row| row.id).collect()
}

#[test]
fn a_resuming_claim_takes_what_follows_its_point_and_higher_priorities() {
    let db = TestDb::new();
    let mut conn = db.conn();
    let first = put_many(&mut conn, 10, "q", 100, -60.0);
    let head = Claim::new("w").queues(["q"]).limit(4);
    let taken = claim(&mut conn, &head).expect("claim");
    assert_eq!(ids(&taken), first[..4]);
    let point = Resume::after(taken.last().expect("a job"));

    // Behind the point at its priority (an older run_at: a retry or a
    // scheduled job come due), above it, and below it.
    let behind = put_many(&mut conn, 1, "q", 100, -120.0);
    let urgent = put_many(&mut conn, 1, "q", 500, 0.0);
    let low = put_many(&mut conn, 1, "q", 10, -300.0);
    let other_queue = put_many(&mut conn, 1, "other", 100, -60.0);

    let resuming = Claim::new("w")
        .queues(["q", "other"])
        .limit(20)
        .resume_at([point.clone()]);
    let taken = claim(&mut conn, &resuming).expect("resuming claim");
    let mut expected = urgent.clone();
    expected.extend_from_slice(&first[4..]);
    expected.extend_from_slice(&low);
    let from_q: Vec<JobId> = taken
        .iter()
        .filter(|row| row.queue == "q")
        .map(|row| row.id)
        .collect();
    assert_eq!(from_q, expected, "higher priority, after the point, lower");
    assert!(
        taken.iter().any(|row| row.id == other_queue[0]),
        "a queue without a point is read from its start"
    );
    for row in &taken {
        assert!(
            row.queue != "q"
                || row.priority > point.priority
                || point.is_before(&Resume::after(row)),
            "{row:?}"
        );
    }

    // The job behind the point waits for a claim from the start.
    let again = claim(&mut conn, &resuming).expect("claim");
    assert!(again.is_empty(), "{again:?}");
    let from_start = claim(&mut conn, &head).expect("claim");
    assert_eq!(ids(&from_start), behind);
}

#[test]
fn two_points_for_one_queue_are_refused() {
    let db = TestDb::new();
    let mut conn = db.conn();
    put_many(&mut conn, 2, "q", 100, 0.0);
    let taken = claim(&mut conn, &Claim::new("w").queues(["q"]).limit(2)).expect("claim");
    let points = taken.iter().map(Resume::after);
    let err =
        claim(&mut conn, &Claim::new("w").queues(["q"]).resume_at(points)).expect_err("two points");
    assert!(
        err.to_string().contains("queue `q` has two resume points"),
        "{err}"
    );
}

#[test]
fn under_a_pinned_horizon_a_resuming_claim_reads_only_what_it_takes() {
    let db = TestDb::new();
    let mut conn = db.conn();
    // A long report: its snapshot keeps every version it could see.
    let mut report = db.conn();
    report
        .batch_execute("BEGIN ISOLATION LEVEL REPEATABLE READ; SELECT count(*) FROM jobqueue_jobs")
        .expect("pin the horizon");

    let claimed_since_pin = 5_000;
    put_many(&mut conn, claimed_since_pin, "q", 100, -1.0);
    let mut session = QueueSession::establish(&db.url).expect("session");
    let mut point = None;
    let batch = Claim::new("w").queues(["q"]).limit(1_000);
    for _ in 0..claimed_since_pin / 1_000 {
        let claim = batch.clone().resume_at(point.clone());
        let rows = session.claim(&claim).expect("claim");
        assert_eq!(rows.len(), 1_000);
        point = rows.last().map(Resume::after);
    }
    let fresh = put_many(&mut conn, 100, "q", 100, 0.0);

    // The head of the queue: behind every job claimed since the pin.
    let head = session.queue_head("q").expect("queue head");
    assert!(
        head.entries_read > claimed_since_pin as i64,
        "{} entries read",
        head.entries_read
    );
    assert_eq!(head.first.map(|first| first.id), Some(fresh[0]));

    // Index entries each claim reads (its own statistics, flushed): the
    // resuming claim first, then the same claim from the start.
    let from_start = Claim::new("w").queues(["q"]).limit(50);
    let resuming = from_start.clone().resume_at(point.clone());
    let before = entries_read(session.conn());
    assert_eq!(session.claim(&resuming).expect("claim").len(), 50);
    let after_resuming = entries_read(session.conn());
    assert_eq!(session.claim(&from_start).expect("claim").len(), 50);
    let after_start = entries_read(session.conn());
    let (resuming_read, start_read) = (after_resuming - before, after_start - after_resuming);
    println!(
        "index entries read by a claim of 50 with {claimed_since_pin} jobs claimed since the \
         pin: {start_read} from the start, {resuming_read} resuming"
    );
    // Each reads its 50 entries, and one more per range to see that the
    // queue has due jobs; from the start, also the entry of every job
    // claimed since the pin, twice (the look, then the claim).
    assert!(
        start_read >= 2 * claimed_since_pin as i64,
        "{start_read} from the start"
    );
    assert!(resuming_read <= 50 + 4, "{resuming_read} resuming");
    report.batch_execute("ROLLBACK").expect("end the report");
    // Once the horizon moves on, a look marks the old entries dead and the
    // next steps over none of them. (Autovacuum's ANALYZE of the table,
    // due after so many claims, may hold the horizon a moment longer.)
    let mut read = i64::MAX;
    let cleared = jobqueue_tests::poll_until(std::time::Duration::from_secs(30), || {
        let head = session.queue_head("q").expect("queue head");
        assert_eq!(head.first, None);
        read = head.entries_read;
        read <= 1
    });
    assert!(cleared, "{read} entries read after the pin ended");
}

#[test]
fn under_a_pinned_horizon_a_runner_resumes_and_leaves_no_job_behind() {
    let (db, mut conn) = TestDb::with_side_tables();
    let mut report = db.conn();
    report
        .batch_execute("BEGIN ISOLATION LEVEL REPEATABLE READ; SELECT count(*) FROM jobqueue_jobs")
        .expect("pin the horizon");
    // No vacuum in the test: the entries of claimed jobs stay until a scan
    // marks them dead, as between two vacuums under a heavy load.
    autovacuum_off(&mut conn);
    // Named queues: no claim of every queue comes to find what the resumed
    // claims would miss.
    let mut config = jobqueue_runner::RunnerConfig::new(&db.url)
        .keep_completed(jobqueue_tests::KEEP_COMPLETED)
        .concurrency(16)
        .queues(["q", "fresh"]);
    config.vacuum_interval = std::time::Duration::from_secs(3600);
    let runner = jobqueue_runner::Runner::new(config, jobqueue_tests::jobs::registry())
        .start()
        .expect("start the runner");
    let within = std::time::Duration::from_secs(120);

    // Enough claimed jobs behind the head that the runner's look at it
    // reads past its threshold, then work that keeps it claiming.
    let first_due = chrono::Utc::now() - chrono::Duration::seconds(1);
    put_at(&mut conn, 4_000, "q", 100, first_due);
    jobqueue_tests::wait_for("the first jobs done", within, || {
        jobqueue_tests::count_where(&mut conn, "status = 'completed'") == 4_000
    });
    jobqueue_tests::wait_for("claims that resume", within, || {
        put_many(&mut conn, 100, "q", 100, 0.0);
        runner.stats().resumed_claims > 0
    });

    // What resumed claims would pass over, or not see at all: a job of the
    // same priority that sorts among the old entries (due with the first
    // jobs, a later id: a retry come due looks so), one of higher
    // priority, one in a queue the runner has not claimed from yet.
    let behind = put_at(&mut conn, 1, "q", 100, first_due);
    let urgent = put_many(&mut conn, 1, "q", 900, 0.0);
    let new_queue = put_many(&mut conn, 1, "fresh", 100, 0.0);
    // Work keeps coming meanwhile, so the queue stays one the runner
    // claims from (and resumes in).
    jobqueue_tests::wait_for("the jobs resumed claims would miss", within, || {
        put_many(&mut conn, 10, "q", 100, 0.0);
        [behind[0], urgent[0], new_queue[0]]
            .into_iter()
            .all(|id| jobqueue_tests::is_completed(&mut conn, id))
    });
    assert!(runner.stats().resumed_claims > 0, "{:?}", runner.stats());
    report.batch_execute("ROLLBACK").expect("end the report");

    // The report has ended: claims go back to the start of the queue, even
    // while more jobs are claimed between two looks at its head than a
    // look may read before claims resume (jobs keep coming faster than a
    // thousand a second). Back: a run of 5,000 claimed jobs of which no
    // claim resumed.
    let mut window = runner.stats();
    let back = jobqueue_tests::poll_until(within, || {
        put_many(&mut conn, 2_000, "q", 100, 0.0);
        let now = runner.stats();
        if now.claimed < window.claimed + 5_000 {
            return false;
        }
        let resumed = now.resumed_claims - window.resumed_claims;
        window = now;
        resumed == 0
    });
    assert!(
        back,
        "claims still resume after the report ended: {:?}",
        runner.stats()
    );
    runner.shutdown();
}
