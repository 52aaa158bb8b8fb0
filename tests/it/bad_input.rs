//! Every invalid option is refused with an error naming the field, before
//! anything reaches the database; nothing panics.

use std::time::Duration;

use jobqueue_core::engine::{Claim, Progress, claim, prune, report_progress, rescue_stale};
use jobqueue_core::{Error, Job, JobOptions, NewJob, Retention};
use jobqueue_tests::{TestDb, count_where, put};
use serde::{Deserialize, Serialize};

fn field_of(result: Result<NewJob, Error>) -> &'static str {
    match result {
        Err(Error::InvalidOption { field, reason }) => {
            assert!(!reason.is_empty());
            field
        }
        other => panic!("expected an invalid option, got {other:?}"),
    }
}

fn with(options: JobOptions) -> Result<NewJob, Error> {
    NewJob::new("t", "{}", options)
}

#[test]
fn each_invalid_option_names_its_field() {
    assert_eq!(field_of(with(JobOptions::new().priority(-1))), "priority");
    assert_eq!(field_of(with(JobOptions::new().priority(1001))), "priority");
    assert_eq!(
        field_of(with(JobOptions::new().max_attempts(0))),
        "max_attempts"
    );
    assert_eq!(
        field_of(with(JobOptions::new().max_attempts(1001))),
        "max_attempts"
    );
    assert_eq!(field_of(with(JobOptions::new().queue(""))), "queue");
    assert_eq!(
        field_of(with(JobOptions::new().queue("q".repeat(65)))),
        "queue"
    );
    for bad in [
        "has space",
        "quote'",
        "semi;colon",
        "back\\slash",
        "new\nline",
        "ünï",
        "a\"b",
    ] {
        assert_eq!(
            field_of(with(JobOptions::new().queue(bad))),
            "queue",
            "{bad:?}"
        );
        assert_eq!(
            field_of(NewJob::new(bad, "{}", JobOptions::new())),
            "job type",
            "{bad:?}"
        );
    }
    assert_eq!(
        field_of(NewJob::new("", "{}", JobOptions::new())),
        "job type"
    );
    assert_eq!(
        field_of(with(JobOptions::new().unique_key(""))),
        "unique_key"
    );
    assert_eq!(
        field_of(with(JobOptions::new().unique_key("k".repeat(256)))),
        "unique_key"
    );
    assert_eq!(
        field_of(with(JobOptions::new().unique_key("a\0b"))),
        "unique_key"
    );
    assert_eq!(
        field_of(NewJob::new("t", "{not json", JobOptions::new())),
        "payload"
    );
    assert_eq!(
        field_of(with(
            JobOptions::new().delay(Duration::from_secs(200 * 365 * 24 * 3600))
        )),
        "delay"
    );
    let message = with(JobOptions::new().queue("bad queue"))
        .expect_err("invalid")
        .to_string();
    assert!(
        message.contains("queue") && message.contains("A-Z"),
        "{message}"
    );
}

#[derive(Serialize, Deserialize)]
struct Blob {
    data: String,
}

impl Job for Blob {
    const JOB_TYPE: &'static str = "blob";
    const MAX_PAYLOAD_BYTES: usize = 1024;
}

#[test]
fn oversized_payload_is_refused_naming_the_limit() {
    let (_db, mut conn) = TestDb::connected();
    let err = Blob {
        data: "x".repeat(2000),
    }
    .enqueue(&mut conn)
    .expect_err("too large");
    match &err {
        Error::PayloadTooLarge {
            job_type,
            size,
            limit,
        } => {
            assert_eq!((job_type.as_str(), *limit), ("blob", 1024));
            assert!(*size > 2000);
        }
        other => panic!("expected PayloadTooLarge, got {other:?}"),
    }
    assert!(err.to_string().contains("1024"), "{err}");
    // The per-enqueue option can raise it.
    Blob {
        data: "x".repeat(2000),
    }
    .options()
    .max_payload_bytes(4096)
    .enqueue(&mut conn)
    .expect("raised limit");
    assert_eq!(count_where(&mut conn, "true"), 1);
}

#[test]
fn invalid_worker_side_arguments_are_refused() {
    let (_db, mut conn) = TestDb::connected();
    let named = |r: jobqueue_core::Result<_>| match r {
        Err(Error::InvalidOption { field, .. }) => field,
        Err(other) => panic!("expected an invalid option, got {other:?}"),
        Ok(_) => panic!("expected an invalid option, got Ok"),
    };
    assert_eq!(
        named(claim(&mut conn, &Claim::new("w").limit(0)).map(|_| ())),
        "limit"
    );
    assert_eq!(
        named(claim(&mut conn, &Claim::new("")).map(|_| ())),
        "worker_id"
    );
    assert_eq!(
        named(claim(&mut conn, &Claim::new("w").queues(["no'pe"])).map(|_| ())),
        "queue"
    );
    assert_eq!(
        named(claim(&mut conn, &Claim::new("w").lease(Duration::ZERO)).map(|_| ())),
        "lease"
    );
    assert_eq!(named(rescue_stale(&mut conn, 0).map(|_| ())), "limit");
    let retention = Retention::default().batch(0);
    assert_eq!(named(prune(&mut conn, &retention).map(|_| ())), "batch");

    put(&mut conn, "t", JobOptions::new());
    let lease = claim(&mut conn, &Claim::new("w")).expect("claim")[0].lease();
    let over = Progress {
        percent: Some(101),
        ..Progress::default()
    };
    assert_eq!(
        named(report_progress(&mut conn, &lease, &over).map(|_| ())),
        "progress"
    );
    assert!("not-a-uuid".parse::<jobqueue_core::JobId>().is_err());
}
