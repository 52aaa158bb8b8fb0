//! Derived jobs enqueue with the constants their `#[job(...)]` gave, and the
//! trait's defaults for the rest.

use jobqueue_core::{Error, Job, JobRow};
use jobqueue_tests::{TestDb, read_job, settings};
use serde::{Deserialize, Serialize};

#[derive(Debug, PartialEq, Serialize, Deserialize, Job)]
#[job(type = "email.send", priority = 150, queue = "mail", max_attempts = 5)]
struct SendEmail {
    to: String,
}

#[derive(Debug, PartialEq, Serialize, Deserialize, Job)]
#[job(type = "image.resize")]
struct Resize(String, u32);

#[derive(Debug, PartialEq, Serialize, Deserialize, Job)]
#[job(type = "cache.flush", priority = 900, max_attempts = 1)]
struct FlushCache;

#[derive(Debug, PartialEq, Serialize, Deserialize, Job)]
#[job(type = "report.build", queue = "reports")]
enum Report {
    Daily,
    Monthly { month: u32 },
}

#[derive(Debug, PartialEq, Serialize, Deserialize, Job)]
#[job(type = "webhook.deliver", queue = "hooks", priority = 10)]
struct Deliver<T>
where
    T: Clone,
{
    url: String,
    body: T,
}

#[derive(Debug, Serialize, Deserialize, Job)]
#[job(type = "tiny", max_payload_bytes = 32)]
struct Tiny {
    text: String,
}

#[derive(Debug, Serialize, Deserialize, Job)]
#[job(type = "invoice.send", concurrency_key = "customer")]
struct SendInvoice {
    customer: u64,
    amount: u64,
}

#[derive(Debug, Serialize, Deserialize, Job)]
#[job(type = "invoice.remind", concurrency_key = "customer")]
struct Remind {
    customer: Option<u64>,
}

/// Enqueues `job` with its type's defaults and reads its row back.
fn enqueued<J: Job>(conn: &mut diesel::PgConnection, job: &J) -> JobRow {
    let id = job.enqueue(conn).expect("enqueue").id();
    read_job(conn, id)
}

#[test]
fn attribute_values_land_on_the_row() {
    let db = TestDb::new();
    let email = SendEmail {
        to: "a@example.com".into(),
    };
    let row = enqueued(&mut db.conn(), &email);
    assert_eq!(settings(&row), ("email.send", 150, "mail", 5));
    assert_eq!(row.payload_as::<SendEmail>().expect("payload"), email);
}

#[test]
fn keys_left_out_take_the_defaults() {
    let db = TestDb::new();
    let row = enqueued(&mut db.conn(), &Resize("cat.png".into(), 640));
    assert_eq!(settings(&row), ("image.resize", 100, "default", 3));
    assert_eq!(row.payload, serde_json::json!(["cat.png", 640]));
}

#[test]
fn unit_struct_and_enum_jobs() {
    let (_db, mut conn) = TestDb::connected();
    let flush = enqueued(&mut conn, &FlushCache);
    assert_eq!(settings(&flush), ("cache.flush", 900, "default", 1));
    assert_eq!(
        flush.payload_as::<FlushCache>().expect("payload"),
        FlushCache
    );

    let daily = enqueued(&mut conn, &Report::Daily);
    assert_eq!(settings(&daily), ("report.build", 100, "reports", 3));
    assert_eq!(
        daily.payload_as::<Report>().expect("payload"),
        Report::Daily
    );

    let monthly = enqueued(&mut conn, &Report::Monthly { month: 11 });
    assert_eq!(
        monthly.payload,
        serde_json::json!({"Monthly": {"month": 11}})
    );
    assert_eq!(
        monthly.payload_as::<Report>().expect("payload"),
        Report::Monthly { month: 11 }
    );
}

#[test]
fn generic_job() {
    let (_db, mut conn) = TestDb::connected();
    let job = Deliver {
        url: "https://example.com/hook".into(),
        body: vec![1, 2, 3],
    };
    let row = enqueued(&mut conn, &job);
    assert_eq!(settings(&row), ("webhook.deliver", 10, "hooks", 3));
    assert_eq!(row.payload_as::<Deliver<Vec<i32>>>().expect("payload"), job);

    let batch = Deliver::enqueue_many(
        &mut conn,
        &[
            Deliver {
                url: "a".into(),
                body: "x".to_owned(),
            },
            Deliver {
                url: "b".into(),
                body: "y".to_owned(),
            },
        ],
    )
    .expect("batch");
    assert_eq!(batch.inserted.len(), 2);
}

#[test]
fn options_override_the_derived_defaults() {
    let (_db, mut conn) = TestDb::connected();
    let id = SendEmail {
        to: "b@example.com".into(),
    }
    .options()
    .queue("urgent")
    .priority(1000)
    .enqueue(&mut conn)
    .expect("enqueue")
    .id();
    let row = read_job(&mut conn, id);
    assert_eq!(settings(&row), ("email.send", 1000, "urgent", 5));
}

#[test]
fn payload_limit_from_the_attribute() {
    let (_db, mut conn) = TestDb::connected();
    Tiny { text: "ok".into() }
        .enqueue(&mut conn)
        .expect("a small payload fits")
        .id();
    let refused = Tiny {
        text: "x".repeat(64),
    }
    .enqueue(&mut conn);
    assert!(
        matches!(refused, Err(Error::PayloadTooLarge { limit: 32, .. })),
        "{refused:?}"
    );
}

#[test]
fn concurrency_key_from_the_attribute() {
    let invoice = SendInvoice {
        customer: 42,
        amount: 100,
    };
    assert_eq!(invoice.concurrency_key().as_deref(), Some("42"));
    let remind = Remind { customer: Some(7) };
    assert_eq!(remind.concurrency_key().as_deref(), Some("7"));
    assert_eq!(Remind { customer: None }.concurrency_key(), None);
    let email = SendEmail {
        to: "a@example.com".into(),
    };
    assert_eq!(
        email.concurrency_key(),
        None,
        "no `key`, no concurrency key"
    );
}
