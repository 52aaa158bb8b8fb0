//! The runner's `tracing` spans (the `tracing` feature), seen by a
//! capturing subscriber of this file's own: one `attempt` span per attempt
//! of a job, with its fields and outcome, the handler's own spans nested
//! under it. Jobs are worked by the testing kit's drain, which takes the
//! runner's attempt path on this test's thread, where the subscriber is
//! the default. (`tests/tracing_runner.rs` sees a runner's.)

use chrono::{TimeDelta, Utc};
use diesel::prelude::*;
use jobqueue_core::Job;
use jobqueue_runner::{JobContext, JobError, Perform, Registry};
use jobqueue_testing::Drain;
use jobqueue_tests::TestDb;
use jobqueue_tests::span_capture::{Capture, Seen};
use serde::{Deserialize, Serialize};
use tracing_subscriber::layer::SubscriberExt;

/// A greeting whose handler opens a span of its own and logs an event in it.
#[derive(Serialize, Deserialize, Job)]
#[job(type = "trace.greet", queue = "mail", priority = 7)]
struct Greet {
    to: String,
}

impl Perform for Greet {
    fn perform(&self, _ctx: &mut JobContext<'_>) -> Result<(), JobError> {
        let _render = tracing::info_span!("render", to = %self.to).entered();
        tracing::info!("rendered");
        Ok(())
    }
}

/// Fails its first attempt, succeeds on the next.
#[derive(Serialize, Deserialize, Job)]
#[job(type = "trace.flaky", max_attempts = 3)]
struct Flaky {}

impl Perform for Flaky {
    fn perform(&self, ctx: &mut JobContext<'_>) -> Result<(), JobError> {
        if ctx.attempt() == 1 {
            return Err(JobError::retry("not yet"));
        }
        Ok(())
    }
}

#[test]
fn each_attempt_has_a_span_with_its_fields_outcome_and_the_handlers_spans() {
    let capture = Capture::default();
    let subscriber = tracing_subscriber::registry().with(capture.clone());
    let _default = jobqueue_tests::span_capture::set_default(subscriber);

    let (_db, mut conn) = TestDb::connected();
    conn.begin_test_transaction()
        .expect("begin the test transaction");
    let greet = Greet { to: "ada".into() }
        .enqueue(&mut conn)
        .expect("enqueue")
        .id();
    let flaky = Flaky {}.enqueue(&mut conn).expect("enqueue").id();
    let registry = Registry::new().register::<Greet>().register::<Flaky>();
    Drain::new(&registry).run(&mut conn).expect("first drain");
    // The retry waits out its backoff: an hour later it is due.
    Drain::new(&registry)
        .as_of(Utc::now() + TimeDelta::hours(1))
        .run(&mut conn)
        .expect("second drain");

    let spans = capture.spans();
    let attempts_of = |id: jobqueue_core::JobId| -> Vec<(usize, Seen)> {
        spans
            .iter()
            .cloned()
            .enumerate()
            .filter(|(_, s)| s.name == "attempt" && s.field("job_id") == Some(&id.to_string()))
            .collect()
    };

    let greeted = attempts_of(greet);
    assert_eq!(greeted.len(), 1, "{spans:#?}");
    let (at, attempt) = &greeted[0];
    assert_eq!(attempt.field("job_type"), Some("trace.greet"));
    assert_eq!(attempt.field("queue"), Some("mail"));
    assert_eq!(attempt.field("attempt"), Some("1"));
    assert_eq!(attempt.field("priority"), Some("7"));
    assert_eq!(attempt.field("outcome"), Some("completed"));
    assert_eq!(attempt.field("error"), None, "{attempt:?}");
    let render: Vec<_> = spans.iter().filter(|s| s.name == "render").collect();
    assert_eq!(render.len(), 1, "{spans:#?}");
    assert_eq!(
        render[0].parent,
        Some(*at),
        "the handler's span nests: {spans:#?}"
    );
    assert_eq!(render[0].field("to"), Some("ada"));

    let flakes = attempts_of(flaky);
    assert_eq!(flakes.len(), 2, "{spans:#?}");
    let (first, second) = (&flakes[0].1, &flakes[1].1);
    assert_eq!(first.field("job_type"), Some("trace.flaky"));
    assert_eq!(first.field("queue"), Some("default"));
    assert_eq!(first.field("attempt"), Some("1"));
    assert_eq!(first.field("outcome"), Some("retried"));
    assert_eq!(first.field("error"), Some("not yet"));
    assert_eq!(second.field("attempt"), Some("2"));
    assert_eq!(second.field("outcome"), Some("completed"));
    assert_eq!(second.field("error"), None, "{second:?}");
    assert!(
        flakes.iter().all(|(_, s)| s.parent.is_none()),
        "an attempt span is a root here: {spans:#?}"
    );
}
