//! Jobs whose lease expired are recovered; a lost last attempt is `failed`,
//! never left running.

use std::time::Duration;

use diesel::PgConnection;
use jobqueue_core::engine::{Claim, claim, heartbeat_many, rescue_stale, start_many};
use jobqueue_core::{JobOptions, JobStatus, NewJob, get_job};
use jobqueue_tests::{
    TestDb, assert_contains, bare_jobs, count_where, expire_leases, put, read_job, wait_for,
};

#[test]
fn expired_lease_goes_back_to_pending_and_last_attempt_fails() {
    let (_db, mut conn) = TestDb::connected();
    let id = put(&mut conn, "t", JobOptions::new().max_attempts(2));

    // Attempt 1: the worker starts it, then vanishes.
    let rows = claim(&mut conn, &Claim::new("dead-worker")).expect("claim");
    start_many(&mut conn, &[rows[0].lease()]).expect("start");
    assert!(
        rescue_stale(&mut conn, 100)
            .expect("rescue")
            .requeued
            .is_empty(),
        "live lease untouched"
    );
    expire_leases(&mut conn);
    let rescued = rescue_stale(&mut conn, 100).expect("rescue");
    assert_eq!(rescued.requeued, vec![id]);
    let row = read_job(&mut conn, id);
    assert_eq!(row.status, JobStatus::Pending);
    assert_eq!(row.attempts, 1);
    assert!(row.worker_id.is_none());
    assert!(
        row.last_error
            .as_deref()
            .expect("error")
            .contains("worker lost")
    );

    // Attempt 2 (the last) is lost too: failed, with the reason.
    let rows = claim(&mut conn, &Claim::new("dead-worker-2")).expect("claim");
    assert_eq!(rows[0].attempts, 2);
    start_many(&mut conn, &[rows[0].lease()]).expect("start");
    expire_leases(&mut conn);
    let rescued = rescue_stale(&mut conn, 100).expect("rescue");
    assert_eq!(rescued.failed, vec![id]);
    let row = read_job(&mut conn, id);
    assert_eq!(row.status, JobStatus::Failed);
    assert!(row.finished_at.is_some());
    let error = row.last_error.expect("error");
    assert_contains(&error, &["worker lost", "dead-worker-2", "attempt 2 of 2"]);
    assert_eq!(
        count_where(&mut conn, "status IN ('claimed', 'running')"),
        0
    );
}

#[test]
fn heartbeats_keep_a_lease_alive() {
    let (_db, mut conn) = TestDb::connected();
    put(&mut conn, "t", JobOptions::new());
    let rows = claim(&mut conn, &Claim::new("w").lease(Duration::from_secs(30))).expect("claim");
    let lease = rows[0].lease();
    let expiry = |conn: &mut PgConnection| {
        get_job(conn, lease.job_id)
            .expect("read")
            .found()
            .and_then(|job| job.lease_expires_at)
            .expect("held, with a lease")
    };
    let mut last = expiry(&mut conn);
    for _ in 0..4 {
        let beat = heartbeat_many(&mut conn, &[lease], Duration::from_secs(30)).expect("beat");
        assert_eq!(beat.renewed, vec![lease.job_id]);
        let renewed = expiry(&mut conn);
        assert!(
            renewed > last,
            "the lease moves on from the database's now()"
        );
        last = renewed;
        assert_eq!(
            rescue_stale(&mut conn, 10).expect("rescue").total(),
            0,
            "renewed lease not recovered"
        );
    }
    // Renewed for 200 ms and then left alone, it expires on the database's
    // clock and is recovered.
    heartbeat_many(&mut conn, &[lease], Duration::from_millis(200)).expect("beat");
    let mut rescued = Vec::new();
    wait_for("the lease to expire", Duration::from_secs(30), || {
        rescued.extend(rescue_stale(&mut conn, 10).expect("rescue").requeued);
        !rescued.is_empty()
    });
    assert_eq!(rescued, vec![lease.job_id]);
    let beat = heartbeat_many(&mut conn, &[lease], Duration::from_secs(30)).expect("beat");
    assert_eq!(
        beat.lost,
        vec![lease.job_id],
        "a recovered job's old lease cannot be renewed"
    );
}

#[test]
fn recovery_takes_batches() {
    let (_db, mut conn) = TestDb::connected();
    let jobs: Vec<NewJob> = bare_jobs(25);
    jobqueue_core::enqueue_many(&mut conn, &jobs).expect("enqueue");
    claim(&mut conn, &Claim::new("w").limit(25)).expect("claim");
    expire_leases(&mut conn);
    assert_eq!(rescue_stale(&mut conn, 10).expect("rescue").total(), 10);
    assert_eq!(rescue_stale(&mut conn, 10).expect("rescue").total(), 10);
    assert_eq!(rescue_stale(&mut conn, 10).expect("rescue").total(), 5);
    assert_eq!(count_where(&mut conn, "status = 'pending'"), 25);
}
