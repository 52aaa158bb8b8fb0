//! The claim takes priority first, then run_at, then id; only due jobs; only
//! the queues and types asked for.

use std::time::Duration;

use chrono::Utc;
use jobqueue_core::engine::{Claim, claim};
use jobqueue_core::{JobOptions, JobStatus};
use jobqueue_tests::{TestDb, put, read_job, wait_for};

#[test]
fn priority_first_then_run_at() {
    let (_db, mut conn) = TestDb::connected();
    let now = Utc::now();
    // (priority, minutes overdue) of each job.
    let [low_old, high_new, high_old, mid] =
        [(10, 10), (500, 1), (500, 5), (100, 20)].map(|(priority, minutes)| {
            let run_at = now - chrono::Duration::minutes(minutes);
            put(
                &mut conn,
                "t",
                JobOptions::new().priority(priority).run_at(run_at),
            )
        });

    let got: Vec<_> = claim(&mut conn, &Claim::new("w").limit(10))
        .expect("claim")
        .iter()
        .map(|row| row.id)
        .collect();
    assert_eq!(got, vec![high_old, high_new, mid, low_old]);

    // One at a time gives the same order.
    let (_db, mut conn) = TestDb::connected();
    let a = put(&mut conn, "t", JobOptions::new().priority(1));
    let b = put(&mut conn, "t", JobOptions::new().priority(2));
    let first = claim(&mut conn, &Claim::new("w").limit(1)).expect("claim");
    assert_eq!(first[0].id, b);
    let second = claim(&mut conn, &Claim::new("w").limit(1)).expect("claim");
    assert_eq!(second[0].id, a);
}

#[test]
fn future_job_is_not_claimed_before_it_is_due() {
    let (_db, mut conn) = TestDb::connected();
    // The highest priority, but not due for 1.5 s.
    let not_due = JobOptions::new()
        .priority(1000)
        .delay(Duration::from_millis(1500));
    let later = put(&mut conn, "t", not_due);
    let now_job = put(&mut conn, "t", JobOptions::new().priority(0));
    let got = claim(&mut conn, &Claim::new("w").limit(10)).expect("claim");
    assert_eq!(got.iter().map(|r| r.id).collect::<Vec<_>>(), vec![now_job]);
    assert!(
        claim(&mut conn, &Claim::new("w"))
            .expect("claim")
            .is_empty()
    );

    // Wait on the database's clock until the job is due, then it is claimed.
    let mut got = Vec::new();
    wait_for(
        "the scheduled job to become due",
        Duration::from_secs(10),
        || {
            jobqueue_core::engine::promote_due(&mut conn, 100).expect("promote");
            got = claim(&mut conn, &Claim::new("w")).expect("claim");
            !got.is_empty()
        },
    );
    assert_eq!(got[0].id, later);
    assert!(got[0].claimed_at.expect("claimed_at") >= got[0].run_at);
}

#[test]
fn claim_filters_by_queue_whatever_the_type_and_sets_the_lease() {
    let (_db, mut conn) = TestDb::connected();
    let mail = put(
        &mut conn,
        "email.send",
        JobOptions::new().queue("mail").priority(200),
    );
    let _other_queue = put(&mut conn, "email.send", JobOptions::new().queue("bulk"));
    let other_type = put(&mut conn, "sms.send", JobOptions::new().queue("mail"));
    let got = claim(
        &mut conn,
        &Claim::new("worker-7")
            .queues(["mail"])
            .lease(Duration::from_secs(60)),
    )
    .expect("claim");
    // Queues route jobs: every type in `mail`, nothing from `bulk`.
    let ids: Vec<_> = got.iter().map(|row| row.id).collect();
    assert_eq!(ids, vec![mail, other_type]);
    let row = &got[0];
    assert_eq!(row.id, mail);
    assert_eq!(row.status, JobStatus::Claimed);
    assert_eq!(row.worker_id.as_deref(), Some("worker-7"));
    assert_eq!((row.attempts, row.claim_count), (1, 1));
    let lease =
        (row.lease_expires_at.expect("lease") - row.claimed_at.expect("claimed")).num_seconds();
    assert_eq!(lease, 60);
    assert_eq!(read_job(&mut conn, mail).status, JobStatus::Claimed);
}
