//! A failed attempt goes back to pending with a growing backoff; the last
//! one goes to `failed` with its errors kept.

use std::time::Duration;

use diesel::prelude::*;
use diesel::sql_types::Double;
use jobqueue_core::engine::{Claim, FailOutcome, Failure, Lease, claim, fail};
use jobqueue_core::{JobOptions, JobStatus, RetryPolicy};
use jobqueue_tests::{TestDb, make_due, put, read_job};

#[derive(QueryableByName)]
struct Wait {
    #[diesel(sql_type = Double)]
    secs: f64,
}

/// Seconds from the database's now() to the job's run_at.
fn wait_secs(conn: &mut PgConnection) -> f64 {
    diesel::sql_query(
        "SELECT EXTRACT(EPOCH FROM run_at - now())::float8 AS secs FROM jobqueue_jobs",
    )
    .get_result::<Wait>(conn)
    .expect("read run_at")
    .secs
}

/// Claims the only due job and fails its attempt with `failure`; returns
/// the attempt that failed and what became of the job.
fn claim_and_fail(
    conn: &mut PgConnection,
    failure: impl FnOnce(Lease) -> Failure,
) -> (i32, FailOutcome) {
    let rows = claim(conn, &Claim::new("w")).expect("claim");
    assert_eq!(rows.len(), 1, "the job claimed");
    let outcome = fail(conn, &failure(rows[0].lease())).expect("fail");
    (rows[0].attempts, outcome)
}

#[test]
fn backoff_grows_and_the_last_attempt_is_dead_lettered() {
    let (_db, mut conn) = TestDb::connected();
    let id = put(&mut conn, "flaky", JobOptions::new().max_attempts(4));
    let policy = RetryPolicy {
        base: Duration::from_secs(10),
        max: Duration::from_secs(3600),
        jitter: 0.1,
    };

    let mut waits = Vec::new();
    for attempt in 1..=3 {
        let (attempts, outcome) = claim_and_fail(&mut conn, |lease| {
            Failure::retry(lease, format!("boom {attempt}"), &policy)
        });
        assert_eq!(attempts, attempt);
        assert!(
            matches!(outcome, FailOutcome::Retrying { .. }),
            "{outcome:?}"
        );
        let row = read_job(&mut conn, id);
        // Waiting out its backoff: not in the claim's index until due.
        assert_eq!(row.status, JobStatus::Scheduled);
        assert_eq!(
            row.last_error.as_deref(),
            Some(format!("boom {attempt}").as_str())
        );
        assert!(row.worker_id.is_none() && row.lease_expires_at.is_none());
        let wait = wait_secs(&mut conn);
        let nominal = 10.0 * 2f64.powi(attempt - 1);
        assert!(
            wait > nominal * 0.85 && wait <= nominal * 1.1 + 0.5,
            "attempt {attempt}: waits {wait:.2}s, expected about {nominal}s"
        );
        // Not claimable before its run_at.
        assert!(
            claim(&mut conn, &Claim::new("w"))
                .expect("claim")
                .is_empty()
        );
        waits.push(wait);
        make_due(&mut conn);
    }
    assert!(
        waits.windows(2).all(|w| w[1] > w[0]),
        "backoff grows: {waits:?}"
    );

    let last = claim_and_fail(&mut conn, |lease| Failure::retry(lease, "boom 4", &policy));
    assert_eq!(last, (4, FailOutcome::Failed));
    let row = read_job(&mut conn, id);
    assert_eq!(row.status, JobStatus::Failed);
    assert_eq!(row.attempts, 4);
    assert_eq!(row.last_error.as_deref(), Some("boom 4"));
    assert!(row.finished_at.is_some());
    let history: Vec<String> = row
        .errors
        .as_array()
        .expect("errors is an array")
        .iter()
        .map(|e| e["error"].as_str().expect("error text").to_owned())
        .collect();
    assert_eq!(history, ["boom 1", "boom 2", "boom 3", "boom 4"]);
    assert_eq!(row.errors[3]["attempt"], 4);
    make_due(&mut conn);
    assert!(
        claim(&mut conn, &Claim::new("w"))
            .expect("claim")
            .is_empty(),
        "failed jobs stay failed"
    );
}

#[test]
fn permanent_failure_skips_remaining_attempts_and_history_is_bounded() {
    let (_db, mut conn) = TestDb::connected();
    let id = put(&mut conn, "t", JobOptions::new().max_attempts(50));
    for attempt in 1..=12 {
        // Due again at once, whatever its backoff.
        make_due(&mut conn);
        claim_and_fail(&mut conn, |lease| {
            Failure::retry(lease, format!("e{attempt}"), &RetryPolicy::DEFAULT)
        });
    }
    let row = read_job(&mut conn, id);
    let errors = row.errors.as_array().expect("array");
    assert_eq!(errors.len(), 10, "history keeps the last 10");
    assert_eq!(errors[0]["error"], "e3");
    assert_eq!(errors[9]["error"], "e12");

    make_due(&mut conn);
    let (_, outcome) = claim_and_fail(&mut conn, |lease| Failure::permanent(lease, "bad payload"));
    assert_eq!(outcome, FailOutcome::Failed);
    let row = read_job(&mut conn, id);
    assert_eq!((row.status, row.attempts), (JobStatus::Failed, 13));
}

#[test]
fn very_long_errors_are_cut() {
    let (_db, mut conn) = TestDb::connected();
    let id = put(&mut conn, "t", JobOptions::new());
    let huge = "x".repeat(1_000_000) + "\0end";
    claim_and_fail(&mut conn, |lease| Failure::permanent(lease, huge));
    let row = read_job(&mut conn, id);
    let kept = row.last_error.expect("error kept");
    assert!(
        kept.len() < 9000 && kept.ends_with("[truncated]"),
        "{} bytes",
        kept.len()
    );
}
