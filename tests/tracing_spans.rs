//! The runner's `tracing` spans (the `tracing` feature), seen by a
//! capturing subscriber of this file's own: one `attempt` span per attempt
//! of a job, with its fields and outcome, the handler's own spans nested
//! under it. Jobs are worked by the testing kit's drain, which takes the
//! runner's attempt path on this test's thread, where the subscriber is
//! the default.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use chrono::{TimeDelta, Utc};
use diesel::prelude::*;
use jobqueue_core::Job;
use jobqueue_runner::{JobContext, JobError, Perform, Registry};
use jobqueue_testing::Drain;
use jobqueue_tests::TestDb;
use serde::{Deserialize, Serialize};
use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing_subscriber::layer::{Context, Layer, SubscriberExt};
use tracing_subscriber::registry::LookupSpan;

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

/// A span as the subscriber saw it: its name, its fields (as recorded by
/// the end) and its parent's index among the spans seen.
#[derive(Debug, Clone)]
struct Seen {
    name: &'static str,
    fields: BTreeMap<String, String>,
    parent: Option<usize>,
}

impl Seen {
    fn field(&self, name: &str) -> Option<&str> {
        self.fields.get(name).map(String::as_str)
    }
}

/// Every span made, in order; a span's index is kept in its extensions.
#[derive(Clone, Default)]
struct Capture(Arc<Mutex<Vec<Seen>>>);

/// A span's index in [`Capture`].
struct Index(usize);

/// Writes fields into a map, values by their `Debug` (a `%` field's is its
/// `Display`), strings as they are.
struct Fields<'a>(&'a mut BTreeMap<String, String>);

impl Visit for Fields<'_> {
    fn record_str(&mut self, field: &Field, value: &str) {
        self.0.insert(field.name().to_owned(), value.to_owned());
    }

    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        self.0.insert(field.name().to_owned(), format!("{value:?}"));
    }
}

impl<S: tracing::Subscriber + for<'a> LookupSpan<'a>> Layer<S> for Capture {
    fn on_new_span(&self, attrs: &Attributes<'_>, id: &Id, ctx: Context<'_, S>) {
        let span = ctx.span(id).expect("a new span is in the registry");
        let parent = span
            .parent()
            .and_then(|parent| parent.extensions().get::<Index>().map(|i| i.0));
        let mut fields = BTreeMap::new();
        attrs.record(&mut Fields(&mut fields));
        let mut seen = self.0.lock().expect("capture lock");
        seen.push(Seen {
            name: attrs.metadata().name(),
            fields,
            parent,
        });
        span.extensions_mut().insert(Index(seen.len() - 1));
    }

    fn on_record(&self, id: &Id, values: &Record<'_>, ctx: Context<'_, S>) {
        let span = ctx.span(id).expect("a recorded span is in the registry");
        let Some(index) = span.extensions().get::<Index>().map(|i| i.0) else {
            return;
        };
        let mut seen = self.0.lock().expect("capture lock");
        values.record(&mut Fields(&mut seen[index].fields));
    }
}

impl Capture {
    fn spans(&self) -> Vec<Seen> {
        self.0.lock().expect("capture lock").clone()
    }
}

#[test]
fn each_attempt_has_a_span_with_its_fields_outcome_and_the_handlers_spans() {
    let capture = Capture::default();
    let subscriber = tracing_subscriber::registry().with(capture.clone());
    let _default = tracing::subscriber::set_default(subscriber);

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
    assert_eq!(first.field("outcome"), Some("retry"));
    assert_eq!(first.field("error"), Some("not yet"));
    assert_eq!(second.field("attempt"), Some("2"));
    assert_eq!(second.field("outcome"), Some("completed"));
    assert_eq!(second.field("error"), None, "{second:?}");
    assert!(
        flakes.iter().all(|(_, s)| s.parent.is_none()),
        "an attempt span is a root here: {spans:#?}"
    );
}
