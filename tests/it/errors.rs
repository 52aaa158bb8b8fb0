//! Errors compose with what applications write: the queue's error and
//! Diesel's convert both ways with `?`, handlers use `?` on everyday error
//! types, and a type's own backoff overrides the runner's.

use std::time::Duration;

use anyhow::Context;
use diesel::prelude::*;
use jobqueue_core::{Job, JobStatus};
use jobqueue_runner::{JobContext, JobError, Perform, Registry, Runner, RunnerConfig};
use jobqueue_tests::{TestDb, count_where, read_job, wait_for};
use serde::{Deserialize, Serialize};

#[derive(Serialize, Deserialize, Job)]
#[job(type = "test.errors.note")]
struct Note {
    text: String,
}

/// `?` on enqueue and on Diesel calls inside a closure returning the
/// queue's own `Result`.
fn note(conn: &mut PgConnection, key: &str, priority: i32) -> jobqueue_core::Result<()> {
    conn.transaction(|conn| {
        diesel::sql_query("SELECT 1").execute(conn)?; // diesel::result::Error
        Note { text: "a".into() }
            .options()
            .unique_key(key)
            .priority(priority)
            .enqueue(conn)?;
        Ok(())
    })
}

#[test]
fn queue_errors_and_diesel_errors_convert_both_ways() {
    let (_db, mut conn) = TestDb::connected();

    // A duplicate unique key is an outcome: the transaction goes on and
    // commits the first job.
    let result: QueryResult<()> = conn.transaction(|conn| {
        Note { text: "x".into() }
            .options()
            .unique_key("k1")
            .enqueue(conn)?;
        let second = Note { text: "y".into() }
            .options()
            .unique_key("k1")
            .enqueue(conn)?;
        assert!(second.is_duplicate(), "{second:?}");
        Ok(())
    });
    result.expect("a duplicate does not end the transaction");
    assert_eq!(count_where(&mut conn, "unique_key = 'k1'"), 1);

    // Inside a closure returning `QueryResult`, the queue's refusal rolls
    // the transaction back and comes out whole at the other end.
    let result: QueryResult<()> = conn.transaction(|conn| {
        Note { text: "z".into() }.enqueue(conn)?;
        Note {
            text: "w".repeat(2 << 20),
        }
        .enqueue(conn)?;
        Ok(())
    });
    let err = result.expect_err("the oversized payload is refused");
    assert!(matches!(err, diesel::result::Error::QueryBuilderError(_)));
    assert!(matches!(
        jobqueue_core::Error::from_diesel(&err),
        Some(jobqueue_core::Error::PayloadTooLarge { job_type, .. }) if job_type == "test.errors.note"
    ));
    assert!(matches!(
        jobqueue_core::Error::from(err),
        jobqueue_core::Error::PayloadTooLarge { .. }
    ));
    assert_eq!(count_where(&mut conn, "true"), 1, "rolled back");

    // A database error is handed to Diesel as the database error it was.
    let invalid: QueryResult<()> = conn.transaction(|conn| {
        Note { text: "z".into() }
            .options()
            .priority(5000)
            .enqueue(conn)?;
        Ok(())
    });
    let invalid = invalid.expect_err("priority out of range");
    assert!(matches!(
        jobqueue_core::Error::from_diesel(&invalid),
        Some(jobqueue_core::Error::InvalidOption {
            field: "priority",
            ..
        })
    ));
    let from_db = jobqueue_core::Error::from(diesel::result::Error::NotFound);
    assert!(matches!(
        diesel::result::Error::from(from_db),
        diesel::result::Error::NotFound
    ));
    assert_eq!(
        jobqueue_core::Error::from_diesel(&diesel::result::Error::NotFound).map(|_| ()),
        None
    );

    // Inside a closure returning the queue's `Result`.
    note(&mut conn, "k2", 100).expect("first");
    note(&mut conn, "k2", 100).expect("a duplicate");
    assert!(matches!(
        note(&mut conn, "k3", 5000),
        Err(jobqueue_core::Error::InvalidOption {
            field: "priority",
            ..
        })
    ));
    assert_eq!(count_where(&mut conn, "unique_key IN ('k2', 'k3')"), 1);
}

#[test]
fn handlers_use_question_mark_on_everyday_errors() {
    fn io() -> Result<(), JobError> {
        Err(std::io::Error::other("disk full"))?;
        Ok(())
    }
    fn boxed() -> Result<(), JobError> {
        let parsed: Result<u32, Box<dyn std::error::Error + Send + Sync>> =
            "x".parse::<u32>().map_err(Into::into);
        parsed?;
        Ok(())
    }
    fn any() -> Result<(), JobError> {
        std::fs::read("/no/such/dir/file").context("reading the template")?;
        Ok(())
    }
    fn message() -> Result<(), JobError> {
        Err("the upstream said 503")?;
        Ok(())
    }
    fn owned() -> Result<(), JobError> {
        Err(format!("status {}", 429))?;
        Ok(())
    }
    fn queue() -> Result<(), JobError> {
        Err(jobqueue_core::Error::InvalidOption {
            field: "queue",
            reason: "bad".into(),
        })?;
        Ok(())
    }
    let text = |result: Result<(), JobError>| match result {
        Err(JobError::Retry(text)) => text,
        other => panic!("expected a retry, got {other:?}"),
    };
    assert_eq!(text(io()), "disk full");
    assert_eq!(text(boxed()), "invalid digit found in string");
    // anyhow's context keeps its cause.
    let any = text(any());
    assert!(
        any.starts_with("reading the template: ") && any.contains("No such file"),
        "{any}"
    );
    assert_eq!(text(message()), "the upstream said 503");
    assert_eq!(text(owned()), "status 429");
    // A message that already includes its source is not repeated.
    assert_eq!(text(queue()), "invalid queue: bad");
    let nested = jobqueue_core::Error::from(diesel::result::Error::NotFound);
    let nested = text(Err(JobError::from(nested)));
    assert_eq!(nested, "database error: Record not found");
}

/// Fails every attempt through anyhow, with context.
#[derive(Serialize, Deserialize, Job)]
#[job(
    type = "test.errors.slow_retry",
    backoff_base_ms = 60000,
    backoff_max_secs = 600
)]
struct SlowRetry {}

impl Perform for SlowRetry {
    fn perform(&self, _ctx: &mut JobContext<'_>) -> Result<(), JobError> {
        let reply: anyhow::Result<()> = Err(anyhow::anyhow!("connection refused"));
        reply.context("calling the partner API")?;
        Ok(())
    }
}

/// Fails every attempt, with the runner's backoff.
#[derive(Serialize, Deserialize, Job)]
#[job(type = "test.errors.fast_retry", max_attempts = 3)]
struct FastRetry {}

impl Perform for FastRetry {
    fn perform(&self, _ctx: &mut JobContext<'_>) -> Result<(), JobError> {
        Err("still broken")?
    }
}

#[test]
fn a_types_own_backoff_overrides_the_runners() {
    let (db, mut conn) = TestDb::connected();
    let slow = SlowRetry {}.enqueue(&mut conn).expect("enqueue").id();
    let fast = FastRetry {}.enqueue(&mut conn).expect("enqueue").id();
    let mut config = RunnerConfig::new(&db.url).concurrency(2);
    config.poll_interval = Duration::from_millis(50);
    config.retry = jobqueue_core::RetryPolicy {
        base: Duration::from_millis(10),
        max: Duration::from_millis(10),
        jitter: 0.0,
    };
    let registry = Registry::new()
        .register::<SlowRetry>()
        .register::<FastRetry>();
    let runner = Runner::new(config, registry).start().expect("start");
    wait_for(
        "the fast job's attempts used up",
        Duration::from_secs(30),
        || count_where(&mut conn, &format!("id = '{fast}' AND status = 'failed'")) == 1,
    );
    runner.shutdown();

    let row = read_job(&mut conn, slow);
    assert_eq!((row.status, row.attempts), (JobStatus::Scheduled, 1));
    assert_eq!(
        row.last_error.as_deref(),
        Some("calling the partner API: connection refused")
    );
    // 60 s ± 20 % after the failure, by the database's clock (the failure
    // was a moment ago: the fast job failed three times since).
    let wait = scalar_f64(
        &mut conn,
        &format!(
            "SELECT extract(epoch FROM run_at - now())::float8 AS v FROM jobqueue_jobs \
             WHERE id = '{slow}'"
        ),
    );
    assert!((40.0..=73.0).contains(&wait), "waits {wait} s");
}

fn scalar_f64(conn: &mut PgConnection, query: &str) -> f64 {
    #[derive(QueryableByName)]
    struct V {
        #[diesel(sql_type = diesel::sql_types::Double)]
        v: f64,
    }
    diesel::sql_query(query)
        .get_result::<V>(conn)
        .expect("query")
        .v
}

#[test]
fn errors_say_whether_to_retry_later_or_fix_the_input() {
    let db = TestDb::new();
    let mut conn = db.conn();
    // Input: the same call fails the same way.
    let bad = jobqueue_core::NewJob::new("bad type", "{}", jobqueue_core::JobOptions::new())
        .expect_err("a job type with a space");
    assert!(bad.is_input() && !bad.is_transient(), "{bad}");
    let unknown = jobqueue_core::set_schedule_paused(&mut conn, "no-such-schedule", true)
        .expect_err("no such schedule");
    assert!(unknown.is_input() && !unknown.is_transient(), "{unknown}");
    // State: neither.
    let missing =
        jobqueue_core::cancel(&mut conn, jobqueue_core::JobId::new()).expect_err("no such job");
    assert!(!missing.is_input() && !missing.is_transient(), "{missing}");
    // The database out of reach: later may work.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("a free port");
    let port = listener.local_addr().expect("address").port();
    drop(listener);
    let url = format!("postgres://postgres@127.0.0.1:{port}/x?connect_timeout=2");
    let Err(down) = PgConnection::establish(&url).map_err(jobqueue_core::Error::from) else {
        panic!("nothing listens on port {port}");
    };
    assert!(down.is_transient() && !down.is_input(), "{down}");
    // A write refused by a read-only server (a failover's fenced primary).
    diesel::sql_query("SET default_transaction_read_only = on")
        .execute(&mut conn)
        .expect("read-only session");
    let refused = jobqueue_core::pause_queue(&mut conn, "mail").expect_err("read-only");
    assert!(refused.is_transient(), "{refused}");
}

#[test]
fn an_unknown_job_type_is_an_error_of_its_own() {
    let registry = Registry::new()
        .register::<FastRetry>()
        .register::<SlowRetry>();
    let typo = registry
        .new_job(
            "test.errors.fast_rety",
            "{}",
            jobqueue_core::JobOptions::new(),
        )
        .expect_err("not registered");
    match &typo {
        jobqueue_core::Error::UnknownJobType { job_type, known } => {
            assert_eq!(job_type, "test.errors.fast_rety");
            assert_eq!(known, &["test.errors.fast_retry", "test.errors.slow_retry"]);
        }
        other => panic!("expected an unknown job type, got {other:?}"),
    }
    assert_eq!(
        typo.to_string(),
        "job type `test.errors.fast_rety` is not registered here; the registered types are: \
         test.errors.fast_retry, test.errors.slow_retry"
    );
    // Input: the same call fails the same way; later is no better.
    assert!(typo.is_input() && !typo.is_transient(), "{typo}");
    let none = Registry::new()
        .new_job(
            "test.errors.fast_retry",
            "{}",
            jobqueue_core::JobOptions::new(),
        )
        .expect_err("nothing registered");
    assert!(
        none.to_string().ends_with("no job type is registered"),
        "{none}"
    );
    // A name no job type can have stays an invalid option.
    let malformed = jobqueue_core::NewJob::new("bad type", "{}", jobqueue_core::JobOptions::new())
        .expect_err("a space");
    assert!(matches!(
        malformed,
        jobqueue_core::Error::InvalidOption {
            field: "job type",
            ..
        }
    ));
}
