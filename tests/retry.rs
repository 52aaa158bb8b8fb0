//! A failed attempt goes back to pending with a growing backoff; the last
//! one goes to `failed` with its errors kept.

use std::time::Duration;

use diesel::prelude::*;
use diesel::sql_types::Double;
use jobqueue_core::{
    Claim, FailOutcome, Failure, JobOptions, JobStatus, RetryPolicy, claim, fail, get_job,
};
use jobqueue_tests::{TestDb, make_due, put};

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

#[test]
fn backoff_grows_and_the_last_attempt_is_dead_lettered() {
    let db = TestDb::new();
    let mut conn = db.conn();
    let id = put(&mut conn, "flaky", JobOptions::new().max_attempts(4));
    let policy = RetryPolicy {
        base: Duration::from_secs(10),
        max: Duration::from_secs(3600),
        jitter: 0.1,
    };

    let mut waits = Vec::new();
    for attempt in 1..=3 {
        let rows = claim(&mut conn, &Claim::new("w")).expect("claim");
        assert_eq!(rows.len(), 1, "attempt {attempt} claimed");
        assert_eq!(rows[0].attempts, attempt);
        let outcome = fail(
            &mut conn,
            &Failure::retry(rows[0].lease(), format!("boom {attempt}"), &policy),
        )
        .expect("fail");
        assert!(
            matches!(outcome, FailOutcome::Retrying { .. }),
            "{outcome:?}"
        );
        let row = get_job(&mut conn, id).expect("read").expect("row");
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

    let rows = claim(&mut conn, &Claim::new("w")).expect("claim");
    assert_eq!(rows[0].attempts, 4);
    let outcome = fail(
        &mut conn,
        &Failure::retry(rows[0].lease(), "boom 4", &policy),
    )
    .expect("fail");
    assert_eq!(outcome, FailOutcome::Failed);
    let row = get_job(&mut conn, id).expect("read").expect("row");
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
    let db = TestDb::new();
    let mut conn = db.conn();
    let id = put(&mut conn, "t", JobOptions::new().max_attempts(50));
    let policy = RetryPolicy {
        base: Duration::from_millis(1),
        max: Duration::from_millis(1),
        jitter: 0.0,
    };
    for attempt in 1..=12 {
        make_due(&mut conn);
        let rows = claim(&mut conn, &Claim::new("w")).expect("claim");
        fail(
            &mut conn,
            &Failure::retry(rows[0].lease(), format!("e{attempt}"), &policy),
        )
        .expect("fail");
    }
    let row = get_job(&mut conn, id).expect("read").expect("row");
    let errors = row.errors.as_array().expect("array");
    assert_eq!(errors.len(), 10, "history keeps the last 10");
    assert_eq!(errors[0]["error"], "e3");
    assert_eq!(errors[9]["error"], "e12");

    make_due(&mut conn);
    let rows = claim(&mut conn, &Claim::new("w")).expect("claim");
    let outcome = fail(
        &mut conn,
        &Failure::permanent(rows[0].lease(), "bad payload"),
    )
    .expect("fail");
    assert_eq!(outcome, FailOutcome::Failed);
    let row = get_job(&mut conn, id).expect("read").expect("row");
    assert_eq!((row.status, row.attempts), (JobStatus::Failed, 13));
}

#[test]
fn very_long_errors_are_cut() {
    let db = TestDb::new();
    let mut conn = db.conn();
    let id = put(&mut conn, "t", JobOptions::new());
    let rows = claim(&mut conn, &Claim::new("w")).expect("claim");
    let huge = "x".repeat(1_000_000) + "\0end";
    fail(&mut conn, &Failure::permanent(rows[0].lease(), huge)).expect("fail");
    let row = get_job(&mut conn, id).expect("read").expect("row");
    let kept = row.last_error.expect("error kept");
    assert!(
        kept.len() < 9000 && kept.ends_with("[truncated]"),
        "{} bytes",
        kept.len()
    );
}
