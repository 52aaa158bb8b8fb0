//! A worker that lost its job (lease expired, job recovered and claimed by
//! another) can change nothing; the new holder can.

use std::time::Duration;

use jobqueue_core::engine::{
    Failure, Progress, complete, complete_many, fail, heartbeat_many, release_many,
    report_progress, rescue_stale,
};
use jobqueue_core::{Error, JobOptions, JobStatus};
use jobqueue_tests::{TestDb, claim_one, expire_leases, put, read_job};

#[test]
fn late_writes_of_a_recovered_worker_change_nothing() {
    let (_db, mut conn) = TestDb::connected();
    let id = put(&mut conn, "t", JobOptions::new());

    let a = claim_one(&mut conn, "A");
    expire_leases(&mut conn);
    assert_eq!(
        rescue_stale(&mut conn, 10).expect("rescue").requeued,
        vec![id]
    );

    // Between recovery and the next claim, A's lease is already dead.
    assert!(matches!(
        complete(&mut conn, &a),
        Err(Error::LeaseLost { .. })
    ));
    assert_eq!(read_job(&mut conn, id).status, JobStatus::Pending);

    let b = claim_one(&mut conn, "B");
    assert_eq!(b.attempt, 2);
    assert!(b.token > a.token);

    // Every late write of A is refused and leaves B's hold as it was.
    match complete(&mut conn, &a) {
        Err(Error::LeaseLost { job_id, token }) => assert_eq!((job_id, token), (id, a.token)),
        other => panic!("late complete: {other:?}"),
    }
    assert!(matches!(
        fail(&mut conn, &Failure::permanent(a, "late failure")),
        Err(Error::LeaseLost { .. })
    ));
    assert!(matches!(
        report_progress(
            &mut conn,
            &a,
            &Progress {
                percent: Some(50),
                ..Progress::default()
            }
        ),
        Err(Error::LeaseLost { .. })
    ));
    assert_eq!(
        heartbeat_many(&mut conn, &[a], Duration::from_secs(60))
            .expect("beat")
            .lost,
        vec![id]
    );
    assert_eq!(
        release_many(&mut conn, &[a]).expect("release").lost,
        vec![id]
    );
    let row = read_job(&mut conn, id);
    assert_eq!(
        (row.status, row.worker_id.as_deref(), row.attempts),
        (JobStatus::Claimed, Some("B"), 2)
    );
    assert!(
        row.last_error
            .as_deref()
            .expect("rescue error")
            .contains("worker lost")
    );
    assert_eq!(row.progress, 0);

    // B completes it.
    complete(&mut conn, &b).expect("B completes");
    let row = read_job(&mut conn, id);
    assert_eq!(row.status, JobStatus::Completed);

    // And no late write, by A or by B again, takes a completed job back.
    assert!(complete(&mut conn, &b).is_err());
    assert!(fail(&mut conn, &Failure::retry(a, "x", &Default::default())).is_err());
    assert!(fail(&mut conn, &Failure::retry(b, "x", &Default::default())).is_err());
    let batch = complete_many(&mut conn, &[a, b]).expect("batch");
    assert!(batch.applied.is_empty());
    assert_eq!(batch.lost, vec![id, id]);
    assert_eq!(read_job(&mut conn, id).status, JobStatus::Completed);
}

#[test]
fn a_released_job_gets_a_new_token_but_keeps_its_attempts() {
    let (_db, mut conn) = TestDb::connected();
    let id = put(&mut conn, "t", JobOptions::new());
    let first = claim_one(&mut conn, "A");
    assert_eq!(
        release_many(&mut conn, &[first]).expect("release").applied,
        vec![id]
    );
    let row = read_job(&mut conn, id);
    assert_eq!(
        (row.status, row.attempts),
        (JobStatus::Pending, 0),
        "release gives the attempt back"
    );
    let second = claim_one(&mut conn, "B");
    assert_eq!(second.attempt, 1);
    assert_ne!(second.token, first.token, "tokens are never reused");
    assert!(complete(&mut conn, &first).is_err());
    complete(&mut conn, &second).expect("complete");
}
