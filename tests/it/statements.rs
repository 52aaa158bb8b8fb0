//! Structural facts behind the speed: a claim, a batch completion and a
//! heartbeat with its jobs' progress are one statement each on a queue
//! session, however many jobs they carry.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use diesel::PgConnection;
use diesel::connection::{Connection, InstrumentationEvent};
use jobqueue_core::engine::{Beat, Claim, Failure, GlobalLimits, Progress, QueueSession};
use jobqueue_core::enqueue_many;
use jobqueue_tests::{TestDb, bare_jobs, count_where, status_counts};

/// The statements a connection sent.
struct Statements(Arc<AtomicUsize>);

impl Statements {
    /// Counts the statements `conn` sends from now on.
    fn count(conn: &mut PgConnection) -> Self {
        let count = Arc::new(AtomicUsize::new(0));
        let seen = Arc::clone(&count);
        conn.set_instrumentation(move |event: InstrumentationEvent<'_>| {
            if let InstrumentationEvent::StartQuery { .. } = event {
                seen.fetch_add(1, Ordering::Relaxed);
            }
        });
        Statements(count)
    }

    /// The statements sent since the last call (or since counting began).
    fn since_last(&self) -> usize {
        self.0.swap(0, Ordering::Relaxed)
    }
}

#[test]
fn a_batch_of_1000_is_one_statement_to_claim_and_one_to_complete() {
    let db = TestDb::new();
    let jobs = bare_jobs(1500);
    enqueue_many(&mut db.conn(), &jobs).expect("enqueue");

    let mut session = QueueSession::establish(&db.url).expect("session");
    let statements = Statements::count(session.conn());
    // A runner that knows none of its queues has a global limit claims
    // with `Skip`: one statement.
    let claim = Claim::new("w").limit(1000);
    let rows = session
        .claim(&claim.clone().global_limits(GlobalLimits::Skip))
        .expect("claim");
    assert_eq!(rows.len(), 1000);
    assert_eq!(statements.since_last(), 1, "one statement claims 1000 jobs");
    // Honouring global and rate limits: one statement too, which locks the
    // limited queues' rows, claims and notes what it took.
    let rest = session.claim(&claim).expect("claim");
    assert_eq!(rest.len(), 500);
    assert_eq!(statements.since_last(), 1);

    let leases: Vec<_> = rows.iter().map(|row| row.lease()).collect();
    let done = session.complete_many(&leases[..900]).expect("complete");
    assert_eq!(done.applied.len(), 900);
    assert_eq!(
        statements.since_last(),
        1,
        "one statement completes 900 jobs"
    );

    let failures: Vec<_> = leases[900..]
        .iter()
        .map(|lease| Failure::permanent(*lease, "x"))
        .collect();
    session.fail_many(&failures).expect("fail");
    assert_eq!(statements.since_last(), 1, "one statement fails 100 jobs");

    let mut conn = db.conn();
    assert_eq!(
        status_counts(&mut conn),
        [("claimed", 500), ("completed", 900), ("failed", 100)]
    );
}

#[test]
fn a_heartbeat_of_1000_jobs_carries_their_progress_in_one_statement() {
    let db = TestDb::new();
    enqueue_many(&mut db.conn(), &bare_jobs(1000)).expect("enqueue");
    let mut session = QueueSession::establish(&db.url).expect("session");
    let rows = session
        .claim(
            &Claim::new("w")
                .limit(1000)
                .global_limits(GlobalLimits::Skip),
        )
        .expect("claim");
    // Half the jobs reported progress since the last beat.
    let beats: Vec<Beat> = rows
        .iter()
        .enumerate()
        .map(|(i, row)| Beat {
            lease: row.lease(),
            progress: (i % 2 == 0).then(|| Progress {
                percent: Some(50),
                stage: Some(format!("stage {i}")),
                events: 3,
            }),
            events_base: None,
        })
        .collect();
    let statements = Statements::count(session.conn());
    let beat = session
        .heartbeat_with_progress(&beats, Duration::from_secs(30))
        .expect("beat");
    assert_eq!(beat.renewed.len(), 1000);
    assert_eq!(
        statements.since_last(),
        1,
        "one statement renews 1000 leases and writes 500 reports"
    );
    let mut conn = db.conn();
    assert_eq!(
        status_counts(&mut conn),
        [("claimed", 500), ("running", 500)]
    );
    assert_eq!(
        count_where(
            &mut conn,
            "status = 'running' AND progress = 50 AND events_count = 3 \
             AND current_stage LIKE 'stage %'"
        ),
        500
    );
}

#[test]
fn outside_a_session_each_operation_is_its_own_read_committed_transaction() {
    let db = TestDb::new();
    let jobs = bare_jobs(10);
    let mut conn = db.conn();
    enqueue_many(&mut conn, &jobs).expect("enqueue");
    let statements = Statements::count(&mut conn);
    let rows = jobqueue_core::engine::claim(&mut conn, &Claim::new("w").limit(10)).expect("claim");
    assert_eq!(rows.len(), 10);
    // BEGIN (with the claim's settings), the claim (which locks the
    // limited queues' rows itself), COMMIT.
    assert_eq!(statements.since_last(), 3);
}
