//! Cancel, progress, a job read by id, prune and stats on a real database.

use std::time::Duration;

use diesel::prelude::*;
use jobqueue_core::engine::{
    Beat, Claim, Lease, Progress, cancel_held_many, claim, complete, heartbeat_many,
    heartbeat_with_progress, prune, report_progress,
};
use jobqueue_core::{
    CancelOutcome, Counting, Error, JobId, JobLookup, JobOptions, JobStatus, Missing, NewJob,
    Retention, cancel, enqueue, enqueue_many, get_job, list_queues,
};
use jobqueue_tests::{TestDb, bare_jobs, claim_one, read_job, status_counts};

fn put(conn: &mut PgConnection, queue: &str) -> JobId {
    enqueue(
        conn,
        &NewJob::new("t", "{}", JobOptions::new().queue(queue)).expect("valid"),
    )
    .expect("enqueue")
    .id()
}

/// Enqueues a job in queue `default` and claims it as worker `w`.
fn claimed_job(conn: &mut PgConnection) -> (JobId, Lease) {
    let id = put(conn, "default");
    (id, claim_one(conn, "w"))
}

#[test]
fn cancel_pending_at_once_and_running_by_flag() {
    let (_db, mut conn) = TestDb::connected();
    let pending = put(&mut conn, "default");
    assert_eq!(
        cancel(&mut conn, pending).expect("cancel"),
        CancelOutcome::Cancelled
    );
    assert_eq!(read_job(&mut conn, pending).status, JobStatus::Cancelled);
    assert_eq!(
        cancel(&mut conn, pending).expect("cancel"),
        CancelOutcome::AlreadyFinished(JobStatus::Cancelled)
    );
    assert!(matches!(
        cancel(&mut conn, JobId::new()),
        Err(Error::NotFound(_))
    ));

    let (running, lease) = claimed_job(&mut conn);
    let step = Progress {
        percent: Some(10),
        stage: Some("download".into()),
        events: 1,
    };
    assert!(
        !report_progress(&mut conn, &lease, &step).expect("progress"),
        "not cancelled yet"
    );
    assert_eq!(
        cancel(&mut conn, running).expect("cancel"),
        CancelOutcome::Requested
    );
    // The handler sees the request through its heartbeat and its progress reports.
    let beat = heartbeat_many(&mut conn, &[lease], Duration::from_secs(30)).expect("beat");
    assert_eq!(beat.cancel_requested, vec![running]);
    assert!(report_progress(&mut conn, &lease, &step).expect("progress"));
    assert_eq!(
        cancel_held_many(&mut conn, &[lease])
            .expect("finish")
            .applied,
        vec![running]
    );
    let row = read_job(&mut conn, running);
    assert_eq!((row.status, row.events_count), (JobStatus::Cancelled, 2));
}

#[test]
fn progress_is_recorded() {
    let (_db, mut conn) = TestDb::connected();
    let (id, lease) = claimed_job(&mut conn);
    let report = Progress {
        percent: Some(40),
        stage: Some("rendering".into()),
        events: 3,
    };
    report_progress(&mut conn, &lease, &report).expect("progress");
    report_progress(
        &mut conn,
        &lease,
        &Progress {
            events: 2,
            ..Progress::default()
        },
    )
    .expect("progress");
    let row = read_job(&mut conn, id);
    assert_eq!(row.status, JobStatus::Running);
    assert_eq!(
        (row.progress, row.current_stage.as_deref(), row.events_count),
        (40, Some("rendering"), 5)
    );
    assert!(row.started_at.is_some());
    complete(&mut conn, &lease).expect("complete");
    assert_eq!(read_job(&mut conn, id).progress, 100);
}

#[test]
fn a_heartbeat_writes_the_progress_that_comes_with_it() {
    let (_db, mut conn) = TestDb::connected();
    let (quiet, quiet_lease) = claimed_job(&mut conn);
    let (busy, busy_lease) = claimed_job(&mut conn);
    let (_, gone_lease) = claimed_job(&mut conn);
    complete(&mut conn, &gone_lease).expect("complete");
    let beat = |conn: &mut PgConnection, progress: Progress| {
        heartbeat_with_progress(
            conn,
            &[
                Beat {
                    lease: quiet_lease,
                    progress: None,
                    events_base: None,
                },
                Beat {
                    lease: busy_lease,
                    progress: Some(progress.clone()),
                    events_base: None,
                },
                Beat {
                    lease: gone_lease,
                    progress: Some(progress),
                    events_base: None,
                },
            ],
            Duration::from_secs(30),
        )
        .expect("beat")
    };
    let first = beat(
        &mut conn,
        Progress {
            percent: Some(30),
            stage: Some("download".into()),
            events: 4,
        },
    );
    assert_eq!(
        first.lost,
        vec![gone_lease.job_id],
        "a finished job gets none"
    );
    let row = read_job(&mut conn, busy);
    assert_eq!(
        (
            row.status,
            row.progress,
            row.current_stage.as_deref(),
            row.events_count
        ),
        (JobStatus::Running, 30, Some("download"), 4)
    );
    assert!(row.started_at.is_some());
    // A job that reported nothing is renewed and otherwise left alone.
    let row = read_job(&mut conn, quiet);
    assert_eq!(
        (
            row.status,
            row.progress,
            row.current_stage,
            row.events_count
        ),
        (JobStatus::Claimed, 0, None, 0)
    );
    // What a report leaves out stays; events add up, and stop at the
    // column's largest value instead of failing the batch.
    diesel::sql_query(format!(
        "UPDATE jobqueue_jobs SET events_count = 2147483640 WHERE id = '{busy}'"
    ))
    .execute(&mut conn)
    .expect("near the top");
    beat(
        &mut conn,
        Progress {
            percent: Some(60),
            stage: None,
            events: 100,
        },
    );
    let row = read_job(&mut conn, busy);
    assert_eq!(
        (row.progress, row.current_stage.as_deref(), row.events_count),
        (60, Some("download"), i32::MAX)
    );
    // A report out of range is refused before anything is sent.
    let refused = heartbeat_with_progress(
        &mut conn,
        &[Beat {
            lease: busy_lease,
            progress: Some(Progress {
                stage: Some("a\0b".into()),
                ..Progress::default()
            }),
            events_base: None,
        }],
        Duration::from_secs(30),
    );
    assert!(
        matches!(refused, Err(Error::InvalidOption { field: "stage", .. })),
        "{refused:?}"
    );
}

#[test]
fn get_job_says_why_a_job_is_missing() {
    let (_db, mut conn) = TestDb::connected();
    let (id, lease) = claimed_job(&mut conn);
    match get_job(&mut conn, id).expect("read") {
        JobLookup::Found(job) => assert_eq!(job.status, JobStatus::Claimed),
        JobLookup::NotFound(missing) => panic!("a held job is missing: {missing}"),
    }
    // Completed and deleted (the default): the id could be one jobqueue
    // issued, a moment ago.
    jobqueue_core::engine::complete_and_delete(&mut conn, &lease).expect("complete");
    let missing = match get_job(&mut conn, id).expect("read") {
        JobLookup::NotFound(missing) => missing,
        JobLookup::Found(job) => panic!("a deleted job found: {job:?}"),
    };
    assert_eq!(missing.id, id);
    assert!(
        matches!(missing.reason, Missing::Gone { age, .. } if age < Duration::from_secs(3600)),
        "{missing:?}"
    );
    assert!(!missing.never_issued());
    let text = missing.to_string();
    assert!(
        text.starts_with(&format!("no job with id {id}: it was made "))
            && text.contains("completed jobs are deleted as they complete")
            && text.contains("failed jobs are pruned after 30 days"),
        "{text}"
    );

    // What the id itself shows.
    let mut never = |id: &str| {
        let id: JobId = id.parse().expect("a UUID");
        get_job(&mut conn, id)
            .expect("read")
            .into_result()
            .expect_err("no such job")
    };
    let nil = never("00000000-0000-0000-0000-000000000000");
    assert_eq!(nil.reason, Missing::NotUuidV7 { version: 0 });
    assert!(
        nil.never_issued() && nil.to_string().contains("the nil UUID"),
        "{nil}"
    );
    let v4 = never("6ba7b810-9dad-41d1-80b4-00c04fd430c8");
    assert_eq!(v4.reason, Missing::NotUuidV7 { version: 4 });
    assert!(v4.to_string().contains("jobqueue never issued it"), "{v4}");
    // A UUIDv7 of 2020 could have been issued; one of a day from now
    // (by the database's clock) not yet.
    let old = never("016f5e66-e800-7000-8000-000000000000");
    assert!(
        matches!(old.reason, Missing::Gone { age, .. } if age > Duration::from_secs(365 * 86_400)),
        "{old:?}"
    );
    let tomorrow_ms =
        u64::try_from((chrono::Utc::now() + chrono::TimeDelta::days(1)).timestamp_millis())
            .expect("after 1970");
    let ahead: JobId = uuid::Builder::from_unix_timestamp_millis(tomorrow_ms, &[7; 10])
        .into_uuid()
        .into();
    let ahead = get_job(&mut conn, ahead)
        .expect("read")
        .into_result()
        .expect_err("no such job");
    assert!(
        matches!(ahead.reason, Missing::AheadOfClock { ahead, .. }
            if ahead > Duration::from_secs(20 * 3600)),
        "{ahead:?}"
    );
    assert!(ahead.never_issued());
    assert!(
        ahead.to_string().contains("ahead of the database's clock"),
        "{ahead}"
    );
}

#[test]
fn prune_deletes_only_finished_rows_past_their_retention() {
    let (_db, mut conn) = TestDb::connected();
    let jobs: Vec<NewJob> = bare_jobs(30);
    enqueue_many(&mut conn, &jobs).expect("enqueue");
    let leases: Vec<_> = claim(&mut conn, &Claim::new("w").limit(20))
        .expect("claim")
        .iter()
        .map(|r| r.lease())
        .collect();
    jobqueue_core::engine::complete_many(&mut conn, &leases[..15]).expect("complete");
    jobqueue_core::engine::fail_many(
        &mut conn,
        &leases[15..]
            .iter()
            .map(|l| jobqueue_core::engine::Failure::permanent(*l, "x"))
            .collect::<Vec<_>>(),
    )
    .expect("fail");
    // Age 10 completed and 2 failed rows by two hours.
    diesel::sql_query(
        "UPDATE jobqueue_jobs SET finished_at = now() - interval '2 hours'
         WHERE id IN (SELECT id FROM jobqueue_jobs WHERE status = 'completed' LIMIT 10)
            OR id IN (SELECT id FROM jobqueue_jobs WHERE status = 'failed' LIMIT 2)",
    )
    .execute(&mut conn)
    .expect("age rows");
    let retention = Retention::default()
        .completed(Some(Duration::from_secs(3600)))
        .failed(None)
        .cancelled(Some(Duration::from_secs(3600)))
        .batch(3);
    let pruned = prune(&mut conn, &retention).expect("prune");
    assert_eq!(
        (pruned.completed, pruned.failed, pruned.cancelled),
        (10, 0, 0)
    );
    // Failed rows are kept forever; live rows are untouched.
    assert_eq!(
        status_counts(&mut conn),
        [("pending", 10), ("completed", 5), ("failed", 5)]
    );
}

#[test]
fn stats_count_by_queue_and_status() {
    let (_db, mut conn) = TestDb::connected();
    for _ in 0..3 {
        put(&mut conn, "mail");
    }
    put(&mut conn, "reports");
    diesel::sql_query("UPDATE jobqueue_jobs SET run_at = now() - interval '90 seconds'")
        .execute(&mut conn)
        .expect("backdate");
    let lease =
        claim(&mut conn, &Claim::new("w").queues(["mail"]).limit(1)).expect("claim")[0].lease();
    complete(&mut conn, &lease).expect("complete");
    let stats = list_queues(&mut conn, Counting::WithHistory).expect("stats");
    assert_eq!(
        stats.iter().map(|s| s.queue.as_str()).collect::<Vec<_>>(),
        ["mail", "reports"]
    );
    let mail = &stats[0];
    assert_eq!(
        (
            mail.count(JobStatus::Pending),
            mail.count(JobStatus::Completed)
        ),
        (2, 1)
    );
    assert_eq!(mail.count(JobStatus::Failed), 0);
    let age = mail.oldest_due_age().expect("oldest due").as_secs();
    assert!((89..=100).contains(&age), "oldest due job waited {age}s");
    assert_eq!(stats[1].count(JobStatus::Pending), 1);
    // The everyday counts leave the completed history out, and agree on
    // everything else.
    let live = list_queues(&mut conn, Counting::Live).expect("live stats");
    assert_eq!(live[0].count(JobStatus::Completed), 0);
    assert_eq!(live[0].count(JobStatus::Pending), 2);
    let live_age = live[0].oldest_due_age().expect("oldest due").as_secs();
    assert!(
        (89..=100).contains(&live_age),
        "oldest due job waited {live_age}s"
    );
    assert_eq!(live[1].count(JobStatus::Pending), 1);
}
