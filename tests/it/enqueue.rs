//! Enqueue joins the caller's transaction; options and batches land as asked.

use std::time::Duration;

use diesel::prelude::*;
use jobqueue_core::{Job, JobOptions, JobStatus, NewJob, enqueue_many};
use jobqueue_tests::{TestDb, count_where, read_job, settings};
use serde::{Deserialize, Serialize};

#[derive(Debug, PartialEq, Serialize, Deserialize)]
struct SendEmail {
    to: String,
}

impl Job for SendEmail {
    const JOB_TYPE: &'static str = "email.send";
    const PRIORITY: i32 = 150;
    const QUEUE: &'static str = "mail";
    const MAX_ATTEMPTS: i32 = 5;
}

fn email(to: &str) -> SendEmail {
    SendEmail { to: to.into() }
}

#[test]
fn rolled_back_transaction_leaves_no_job() {
    let (db, mut conn) = TestDb::connected();
    let result: Result<(), diesel::result::Error> = conn.transaction(|conn| {
        email("a@example.com").enqueue(conn).expect("enqueue");
        assert_eq!(
            count_where(conn, "true"),
            1,
            "visible inside the transaction"
        );
        Err(diesel::result::Error::RollbackTransaction)
    });
    assert!(result.is_err());
    assert_eq!(count_where(&mut db.conn(), "true"), 0);
}

#[test]
fn committed_transaction_leaves_exactly_one_job() {
    let (db, mut conn) = TestDb::connected();
    let id = conn
        .transaction(|conn| email("a@example.com").enqueue(conn))
        .expect("enqueue")
        .id();
    let mut other = db.conn();
    assert_eq!(count_where(&mut other, "true"), 1);
    let row = read_job(&mut other, id);
    assert_eq!(settings(&row), ("email.send", 150, "mail", 5));
    assert_eq!(row.status, JobStatus::Pending);
    assert_eq!(row.attempts, 0);
    assert_eq!(
        row.payload_as::<SendEmail>().expect("payload"),
        email("a@example.com")
    );
}

#[test]
fn options_override_the_type_defaults() {
    let (_db, mut conn) = TestDb::connected();
    let id = email("b@example.com")
        .options()
        .priority(900)
        .queue("urgent")
        .max_attempts(1)
        .delay(Duration::from_secs(3600))
        .unique_key("welcome:b")
        .enqueue(&mut conn)
        .expect("enqueue")
        .id();
    let row = read_job(&mut conn, id);
    assert_eq!(settings(&row), ("email.send", 900, "urgent", 1));
    assert_eq!(row.unique_key.as_deref(), Some("welcome:b"));
    let ahead = (row.run_at - row.created_at).num_seconds();
    assert!(
        (3599..=3601).contains(&ahead),
        "run_at is {ahead}s after created_at"
    );
}

#[test]
fn batch_enqueue_inserts_all_in_one_statement_and_keeps_order() {
    let (_db, mut conn) = TestDb::connected();
    let jobs: Vec<NewJob> = (0..5000)
        .map(|i| {
            NewJob::from_job(
                &email(&format!("u{i}@example.com")),
                JobOptions::new().priority(i % 7),
            )
        })
        .collect::<Result<_, _>>()
        .expect("build");
    let done = conn
        .transaction(|conn| enqueue_many(conn, &jobs))
        .expect("enqueue_many");
    assert_eq!(done.inserted.len(), 5000);
    assert!(done.duplicates.is_empty());
    assert_eq!(
        count_where(&mut conn, "job_type = 'email.send' AND status = 'pending'"),
        5000
    );
    assert_eq!(
        count_where(&mut conn, "priority = 6"),
        (0..5000).filter(|i| i % 7 == 6).count() as i64
    );
    // UUIDv7 ids: creation order is id order.
    let mut sorted = done.inserted.clone();
    sorted.sort();
    assert_eq!(sorted, done.inserted);

    let typed = SendEmail::enqueue_many(&mut conn, &[email("x@a"), email("y@a")]).expect("batch");
    assert_eq!(typed.inserted.len(), 2);
}

#[test]
fn raw_json_jobs_enqueue_with_queue_defaults() {
    let (_db, mut conn) = TestDb::connected();
    let job =
        NewJob::new("report.build", r#"{"month": "2026-11"}"#, JobOptions::new()).expect("valid");
    let id = jobqueue_core::enqueue(&mut conn, &job)
        .expect("enqueue")
        .id();
    let row = read_job(&mut conn, id);
    assert_eq!(settings(&row), ("report.build", 100, "default", 3));
    assert_eq!(row.payload["month"], "2026-11");
}

#[test]
fn large_batches_stream_through_copy_with_payloads_intact() {
    let (_db, mut conn) = TestDb::connected();
    let tricky = [
        r#"{"s": "tab\there, back\\slash, newline\nend, quote \" and ünïcode ✓"}"#,
        "{\n\t\"pretty\": [1,\r\n 2]\n}",
        r#"{"null_escape": "\\N", "empty": ""}"#,
    ];
    let jobs: Vec<NewJob> = (0..600)
        .map(|i| {
            NewJob::new(
                "copy.test",
                tricky[i % tricky.len()],
                JobOptions::new().queue(format!("q{}", i % 3)),
            )
        })
        .collect::<Result<_, _>>()
        .expect("build");
    // In a transaction that rolls back: nothing stays.
    let rolled: Result<(), jobqueue_core::Error> = conn.transaction(|conn| {
        enqueue_many(conn, &jobs)?;
        Err(jobqueue_core::Error::NotFound(jobs[0].id()))
    });
    assert!(rolled.is_err());
    assert_eq!(count_where(&mut conn, "true"), 0);

    let done = enqueue_many(&mut conn, &jobs).expect("enqueue");
    assert_eq!(done.inserted.len(), 600);
    for (i, job) in jobs.iter().enumerate().take(3) {
        let row = read_job(&mut conn, job.id());
        let expected: serde_json::Value = serde_json::from_str(tricky[i]).expect("json");
        assert_eq!(row.payload, expected, "payload {i} survives COPY");
        assert_eq!(
            (row.queue.as_str(), row.status),
            (format!("q{i}").as_str(), JobStatus::Pending)
        );
    }
    assert_eq!(
        count_where(&mut conn, "queue = 'q2' AND run_at <= now()"),
        200
    );
}
