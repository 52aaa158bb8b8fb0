//! Enqueue on diesel-async's `AsyncPgConnection` (feature `async`) joins the
//! caller's transaction and reports outcomes as the blocking enqueue does.

use std::time::Duration;

use diesel_async::{AsyncConnection, AsyncPgConnection};
use jobqueue::{EnqueueOutcome, Error, Job, JobOptions, JobStatus, NewJob, enqueue_many_async};
use jobqueue_tests::{TestDb, count_where, read_job, settings};
use serde::{Deserialize, Serialize};

#[derive(Debug, PartialEq, Serialize, Deserialize, Job)]
#[job(
    type = "email.send",
    priority = 150,
    queue = "mail",
    max_attempts = 5,
    crate = "jobqueue"
)]
struct SendEmail {
    to: String,
}

fn email(to: &str) -> SendEmail {
    SendEmail { to: to.into() }
}

async fn connect(db: &TestDb) -> AsyncPgConnection {
    AsyncPgConnection::establish(&db.url)
        .await
        .expect("connect to the test database")
}

#[tokio::test]
async fn committed_transaction_leaves_the_job() {
    let db = TestDb::new();
    let mut conn = connect(&db).await;
    let id = conn
        .transaction::<_, Error, _>(async |conn| email("a@example.com").enqueue_async(conn).await)
        .await
        .expect("enqueue")
        .id();
    let mut other = db.conn();
    let row = read_job(&mut other, id);
    assert_eq!(
        (settings(&row), row.status, count_where(&mut other, "true")),
        (("email.send", 150, "mail", 5), JobStatus::Pending, 1)
    );
    assert_eq!(
        row.payload_as::<SendEmail>().expect("payload"),
        email("a@example.com")
    );
}

#[tokio::test]
async fn rolled_back_transaction_leaves_no_job() {
    let db = TestDb::new();
    let mut conn = connect(&db).await;
    // A closure returning `QueryResult`, as Diesel code usually has: the
    // enqueue's error converts with `?`.
    let result = conn
        .transaction::<(), diesel::result::Error, _>(async |conn| {
            email("a@example.com").enqueue_async(conn).await?;
            email("b@example.com")
                .options()
                .priority(7)
                .enqueue_async(conn)
                .await?;
            Err(diesel::result::Error::RollbackTransaction)
        })
        .await;
    assert!(matches!(
        result,
        Err(diesel::result::Error::RollbackTransaction)
    ));
    assert_eq!(count_where(&mut db.conn(), "true"), 0);
}

#[tokio::test]
async fn an_invalid_job_survives_the_transaction_as_the_queue_error() {
    let db = TestDb::new();
    let mut conn = connect(&db).await;
    let result = conn
        .transaction::<_, diesel::result::Error, _>(async |conn| {
            email("a@example.com")
                .options()
                .max_payload_bytes(4)
                .enqueue_async(conn)
                .await?;
            Ok(())
        })
        .await;
    let error = Error::from(result.expect_err("the payload is over the limit"));
    assert!(
        matches!(error, Error::PayloadTooLarge { limit: 4, .. }),
        "{error}"
    );
    assert_eq!(count_where(&mut db.conn(), "true"), 0);
}

#[tokio::test]
async fn a_duplicate_key_is_an_outcome_and_the_transaction_goes_on() {
    let db = TestDb::new();
    let mut conn = connect(&db).await;
    let (first, second, after) = conn
        .transaction::<_, Error, _>(async |conn| {
            let first = email("a@example.com")
                .options()
                .unique_key("welcome:a")
                .enqueue_async(conn)
                .await?;
            let second = email("a@example.com")
                .options()
                .unique_key("welcome:a")
                .enqueue_async(conn)
                .await?;
            // The transaction is still usable after the duplicate.
            let after = email("b@example.com").enqueue_async(conn).await?;
            Ok((first, second, after))
        })
        .await
        .expect("enqueue");
    let first = first.inserted().expect("the first enqueue inserts");
    match second {
        EnqueueOutcome::Duplicate(duplicate) => {
            assert_eq!(duplicate.unique_key, "welcome:a");
            assert_eq!(duplicate.existing, first);
        }
        other => panic!("expected a duplicate, got {other:?}"),
    }
    let mut check = db.conn();
    assert_eq!(count_where(&mut check, "unique_key = 'welcome:a'"), 1);
    assert_eq!(
        count_where(&mut check, &format!("id = '{}'", after.id())),
        1
    );
}

#[tokio::test]
async fn a_batch_inserts_all_but_the_duplicates_in_one_transaction() {
    let db = TestDb::new();
    let mut conn = connect(&db).await;
    let keyed = |key: &str| {
        NewJob::new("report.build", "{}", JobOptions::new().unique_key(key)).expect("valid")
    };
    let batch = vec![
        keyed("k1"),
        keyed("k1"),
        keyed("k2"),
        NewJob::new("report.build", "{}", JobOptions::new()).expect("valid"),
    ];
    let plain = [email("a@example.com"), email("b@example.com")];
    let (done, typed) = conn
        .transaction::<_, Error, _>(async |conn| {
            let done = enqueue_many_async(conn, &batch).await?;
            let typed = SendEmail::enqueue_many_async(conn, &plain).await?;
            Ok((done, typed))
        })
        .await
        .expect("enqueue the batches");
    assert_eq!(done.inserted.len(), 3);
    assert_eq!(done.duplicates.len(), 1);
    assert_eq!(done.duplicates[0].unique_key, "k1");
    assert_eq!(done.duplicates[0].existing, done.inserted[0]);
    assert_eq!(typed.inserted.len(), 2);
    let mut check = db.conn();
    assert_eq!(count_where(&mut check, "job_type = 'report.build'"), 3);
    assert_eq!(count_where(&mut check, "job_type = 'email.send'"), 2);

    // Outside a transaction a keyed batch takes one of its own; a second
    // pass finds every key held.
    let again = enqueue_many_async(&mut conn, &[keyed("k1"), keyed("k2")])
        .await
        .expect("enqueue again");
    assert!(again.inserted.is_empty());
    assert_eq!(again.duplicates.len(), 2);
    assert_eq!(count_where(&mut check, "true"), 5);
}

#[tokio::test]
async fn a_delayed_job_is_scheduled_for_later() {
    let db = TestDb::new();
    let mut conn = connect(&db).await;
    let id = email("a@example.com")
        .options()
        .delay(Duration::from_secs(3600))
        .enqueue_async(&mut conn)
        .await
        .expect("enqueue")
        .id();
    let mut check = db.conn();
    assert_eq!(read_job(&mut check, id).status, JobStatus::Scheduled);
    assert_eq!(
        count_where(
            &mut check,
            "run_at > now() + interval '59 minutes' AND run_at < now() + interval '61 minutes'"
        ),
        1
    );
}

#[tokio::test]
async fn a_workflow_and_a_batch_enqueue_inside_the_callers_transaction() {
    let db = TestDb::new();
    let mut conn = connect(&db).await;
    let graph = || {
        let mut flow = jobqueue::Workflow::new("async flow").expect("workflow");
        let first = flow.add("first", &email("a@example.com")).expect("step");
        let then = flow.add("then", &email("b@example.com")).expect("step");
        flow.after(then, [first]).expect("edge");
        flow
    };
    // Rolled back: nothing of it is left.
    let rolled_back = conn
        .transaction::<(), Error, _>(async |conn| {
            graph().enqueue_async(conn).await?;
            Err(Error::NotFound(jobqueue::JobId::new()))
        })
        .await;
    assert!(rolled_back.is_err());
    let mut other = db.conn();
    assert_eq!(count_where(&mut other, "true"), 0);
    // Committed: the first step due, the second blocked.
    let enqueued = conn
        .transaction::<_, Error, _>(async |conn| graph().enqueue_async(conn).await)
        .await
        .expect("enqueue");
    assert_eq!(
        read_job(&mut other, enqueued.steps[0].1).status,
        JobStatus::Pending
    );
    assert_eq!(
        read_job(&mut other, enqueued.steps[1].1).status,
        JobStatus::Blocked
    );
    // A batch: its members due, its callback blocked until they finish.
    let mut batch = jobqueue::Batch::new("async batch").expect("batch");
    for to in ["c@example.com", "d@example.com"] {
        batch.add(&email(to)).expect("member");
    }
    batch
        .on_finish(&email("report@example.com"))
        .expect("callback");
    let enqueued = batch.enqueue_async(&mut conn).await.expect("enqueue");
    assert_eq!(enqueued.steps.len(), 3);
    assert_eq!(
        read_job(&mut other, enqueued.steps[2].1).status,
        JobStatus::Blocked
    );
    // A cycle is refused before anything is sent.
    let mut looped = graph();
    let (a, b) = (
        looped.add("a", &email("x@example.com")).expect("step"),
        looped.add("b", &email("y@example.com")).expect("step"),
    );
    looped.after(a, [b]).expect("edge");
    looped.after(b, [a]).expect("edge");
    let err = looped.enqueue_async(&mut conn).await.expect_err("a cycle");
    assert!(err.to_string().contains("cycle"), "{err}");
    assert_eq!(count_where(&mut other, "true"), 5);
}
