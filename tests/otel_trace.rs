//! A request's trace through its jobs (the `tracing` feature), as an
//! OpenTelemetry SDK with an in-memory exporter records it: a `request`
//! span enqueues jobs; a runner works them on its own threads; the
//! exported spans form one trace from the request through each `enqueue`
//! span to each job's first attempt and the handler's spans inside it. An
//! attempt after a retry or a snooze starts its own trace, linked to the
//! enqueue; a job enqueued outside any span starts a trace of its own.
//!
//! The subscriber and the propagator are the process's globals (the
//! runner's threads see no test thread's own): this file holds one test.

use std::time::Duration;

use jobqueue_core::{Job, JobOptions, NewJob, enqueue_many};
use jobqueue_runner::{JobContext, JobError, Perform, Registry, RunnerConfig};
use jobqueue_tests::{TestDb, scalar, start_runner, wait_count};
use opentelemetry::trace::{SpanId, TraceId, TracerProvider as _};
use opentelemetry_sdk::propagation::TraceContextPropagator;
use opentelemetry_sdk::trace::{InMemorySpanExporter, SdkTracerProvider, SpanData};
use serde::{Deserialize, Serialize};
use tracing_subscriber::layer::SubscriberExt;

/// Completes at once, inside a span of its own.
#[derive(Serialize, Deserialize, Job)]
#[job(type = "otel.step")]
struct Step {
    n: u32,
}

impl Perform for Step {
    fn perform(&self, _ctx: &mut JobContext<'_>) -> Result<(), JobError> {
        let _send = tracing::info_span!("send", n = self.n).entered();
        Ok(())
    }
}

/// Fails its first attempt, completes the second.
#[derive(Serialize, Deserialize, Job)]
#[job(type = "otel.flaky", backoff_base_ms = 10, backoff_max_secs = 1)]
struct FlakyOnce {}

impl Perform for FlakyOnce {
    fn perform(&self, ctx: &mut JobContext<'_>) -> Result<(), JobError> {
        if ctx.attempt() == 1 {
            return Err(JobError::retry("the first attempt fails"));
        }
        Ok(())
    }
}

/// Snoozes on its first run, completes the next.
#[derive(Serialize, Deserialize, Job)]
#[job(type = "otel.snooze")]
struct SnoozeOnce {}

impl Perform for SnoozeOnce {
    fn perform(&self, ctx: &mut JobContext<'_>) -> Result<(), JobError> {
        if ctx.row().snoozes == 0 {
            return Err(JobError::snooze(Duration::from_millis(10)));
        }
        Ok(())
    }
}

/// A span's attribute, as text.
fn attribute(span: &SpanData, key: &str) -> Option<String> {
    span.attributes
        .iter()
        .find(|kv| kv.key.as_str() == key)
        .map(|kv| kv.value.to_string())
}

/// The spans named `name` with attribute `key` = `value`.
fn spans_with<'a>(spans: &'a [SpanData], name: &str, key: &str, value: &str) -> Vec<&'a SpanData> {
    spans
        .iter()
        .filter(|s| s.name == name && attribute(s, key).as_deref() == Some(value))
        .collect()
}

/// The one span named `name` with `key` = `value`.
fn one<'a>(spans: &'a [SpanData], name: &str, key: &str, value: &str) -> &'a SpanData {
    let found = spans_with(spans, name, key, value);
    assert_eq!(
        found.len(),
        1,
        "one {name} span with {key}={value}: {found:#?}"
    );
    found[0]
}

/// The attempt span of job `id` whose attempt number is `attempt`, among
/// its runs (`run`: 0 for the first of them).
fn attempt_run<'a>(spans: &'a [SpanData], id: &str, run: usize) -> &'a SpanData {
    let mut runs = spans_with(spans, "attempt", "job_id", id);
    runs.sort_by_key(|s| s.start_time);
    runs.get(run)
        .copied()
        .unwrap_or_else(|| panic!("run {run} of job {id}: {runs:#?}"))
}

/// The spans but the runner's claims and flushes, one line each in the
/// order they started: name, key fields, trace and span ids, parent
/// (`remote` when it came through the job), links.
fn render(spans: &[SpanData]) -> String {
    let mut sorted: Vec<&SpanData> = spans
        .iter()
        .filter(|s| !matches!(&*s.name, "claim" | "flush"))
        .collect();
    sorted.sort_by_key(|s| s.start_time);
    let mut out = String::new();
    for span in sorted {
        let fields: Vec<String> = ["job_type", "attempt", "outcome", "jobs", "n"]
            .iter()
            .filter_map(|key| Some(format!("{key}={}", attribute(span, key)?)))
            .collect();
        let parent = if span.parent_span_id == SpanId::INVALID {
            "root".to_owned()
        } else if span.parent_span_is_remote {
            format!("parent {} (remote)", span.parent_span_id)
        } else {
            format!("parent {}", span.parent_span_id)
        };
        let links: Vec<String> = span
            .links
            .iter()
            .map(|link| {
                format!(
                    "link {}/{}",
                    link.span_context.trace_id(),
                    link.span_context.span_id()
                )
            })
            .collect();
        out.push_str(&format!(
            "{:<8} {:<42} trace {} span {} {} {}\n",
            span.name,
            fields.join(" "),
            span.span_context.trace_id(),
            span.span_context.span_id(),
            parent,
            links.join(" "),
        ));
    }
    out
}

#[test]
fn a_request_trace_goes_through_its_jobs() {
    opentelemetry::global::set_text_map_propagator(TraceContextPropagator::new());
    let exporter = InMemorySpanExporter::default();
    let provider = SdkTracerProvider::builder()
        .with_simple_exporter(exporter.clone())
        .build();
    let layer = tracing_opentelemetry::layer().with_tracer(provider.tracer("otel_trace"));
    tracing::subscriber::set_global_default(tracing_subscriber::registry().with(layer))
        .expect("the only global subscriber of this test binary");

    let (db, mut conn) = TestDb::with_side_tables();
    let (one_id, flaky_id, snooze_id, batch_ids) = {
        let _request = tracing::info_span!("request", route = "/signup").entered();
        let one = Step { n: 1 }.enqueue(&mut conn).expect("enqueue").id();
        let flaky = FlakyOnce {}.enqueue(&mut conn).expect("enqueue").id();
        let snooze = SnoozeOnce {}.enqueue(&mut conn).expect("enqueue").id();
        let batch: Vec<NewJob> = (2..4)
            .map(|n| NewJob::from_job(&Step { n }, JobOptions::new()))
            .collect::<Result<_, _>>()
            .expect("build");
        let batch = enqueue_many(&mut conn, &batch).expect("enqueue").inserted;
        (one, flaky, snooze, batch)
    };
    let outside_id = Step { n: 99 }.enqueue(&mut conn).expect("enqueue").id();

    // What is stored: a W3C traceparent for the jobs enqueued in the
    // request, nothing for the one enqueued outside any span.
    assert_eq!(
        scalar(
            &mut conn,
            "SELECT count(*) AS n FROM jobqueue_jobs WHERE traceparent IS NULL"
        ),
        1
    );
    assert_eq!(
        scalar(
            &mut conn,
            &format!(
                "SELECT count(*) AS n FROM jobqueue_jobs WHERE id = '{outside_id}' AND traceparent IS NULL"
            )
        ),
        1
    );
    assert_eq!(
        scalar(
            &mut conn,
            "SELECT count(*) AS n FROM jobqueue_jobs
             WHERE traceparent ~ '^00-[0-9a-f]{32}-[0-9a-f]{16}-01$'"
        ),
        5
    );
    // Shown to operators: `jobqueue show` prints the stored context.
    let stored = scalar(
        &mut conn,
        &format!(
            "SELECT count(*) AS n FROM jobqueue_jobs WHERE id = '{one_id}' AND traceparent IS NOT NULL"
        ),
    );
    assert_eq!(stored, 1);
    let (code, shown, _) = jobqueue_tests::run_cli(
        env!("CARGO_BIN_EXE_jobqueue-test-worker"),
        &db.url,
        &["show", &one_id.to_string()],
    );
    assert_eq!(code, Some(0));
    let line = shown
        .lines()
        .find(|line| line.starts_with("traceparent:"))
        .unwrap_or_else(|| panic!("no traceparent line:\n{shown}"));
    assert!(
        line.trim_end().ends_with("-01") && line.contains("00-"),
        "{line}"
    );
    let bytes = scalar(
        &mut conn,
        "SELECT max(pg_column_size(traceparent))::int8 AS n FROM jobqueue_jobs",
    );
    eprintln!("bytes of a stored traceparent: {bytes}");

    let registry = Registry::new()
        .register::<Step>()
        .register::<FlakyOnce>()
        .register::<SnoozeOnce>();
    let config = RunnerConfig::new(&db.url)
        .keep_completed(jobqueue_tests::KEEP_COMPLETED)
        .concurrency(2)
        .lease(Duration::from_secs(30));
    let runner = start_runner(config, registry);
    wait_count(&mut conn, "status = 'completed'", 6);
    runner.shutdown();
    provider.force_flush().expect("flush the spans");
    let spans = exporter.get_finished_spans().expect("the exported spans");
    eprintln!("{}", render(&spans));

    let request = spans
        .iter()
        .find(|s| s.name == "request")
        .expect("the request span");
    let trace = request.span_context.trace_id();
    assert_eq!(request.parent_span_id, SpanId::INVALID);

    // Each enqueue is a span of the request's trace, under the request.
    let enqueue_of = |id: &str| one(&spans, "enqueue", "job_id", id);
    let enqueues: Vec<&SpanData> = spans.iter().filter(|s| s.name == "enqueue").collect();
    assert_eq!(enqueues.len(), 4, "{}", render(&spans));
    for enqueue in &enqueues {
        assert_eq!(enqueue.span_context.trace_id(), trace);
        assert_eq!(enqueue.parent_span_id, request.span_context.span_id());
    }
    assert_eq!(
        attribute(enqueue_of(&batch_ids[0].to_string()), "jobs").as_deref(),
        Some("2")
    );

    // A first attempt is a child of its enqueue, in the request's trace,
    // and the handler's span is a child of the attempt.
    let first_attempt_under = |id: &str, enqueue: &SpanData| {
        let attempt = attempt_run(&spans, id, 0);
        assert_eq!(attempt.span_context.trace_id(), trace, "{}", render(&spans));
        assert_eq!(attempt.parent_span_id, enqueue.span_context.span_id());
        assert!(
            attempt.parent_span_is_remote,
            "the parent came through the job"
        );
        assert!(attempt.links.is_empty());
        attempt
    };
    let one_enqueue = enqueue_of(&one_id.to_string());
    let one_attempt = first_attempt_under(&one_id.to_string(), one_enqueue);
    assert_eq!(
        attribute(one_attempt, "outcome").as_deref(),
        Some("completed")
    );
    let send = one(&spans, "send", "n", "1");
    assert_eq!(send.span_context.trace_id(), trace);
    assert_eq!(send.parent_span_id, one_attempt.span_context.span_id());
    let batch_enqueue = enqueue_of(&batch_ids[0].to_string());
    for id in &batch_ids {
        first_attempt_under(&id.to_string(), batch_enqueue);
    }

    // A retry and a snooze: the first run in the request's trace; the next
    // a root of its own trace, linked to the enqueue.
    for id in [flaky_id, snooze_id] {
        let id = id.to_string();
        let enqueue = enqueue_of(&id);
        first_attempt_under(&id, enqueue);
        let again = attempt_run(&spans, &id, 1);
        assert_eq!(again.parent_span_id, SpanId::INVALID, "{}", render(&spans));
        assert_ne!(again.span_context.trace_id(), trace);
        let linked: Vec<_> = again
            .links
            .iter()
            .map(|l| (l.span_context.trace_id(), l.span_context.span_id()))
            .collect();
        let enqueued = (
            enqueue.span_context.trace_id(),
            enqueue.span_context.span_id(),
        );
        assert_eq!(linked, vec![enqueued], "{}", render(&spans));
        assert_eq!(attribute(again, "outcome").as_deref(), Some("completed"));
    }
    let flaky_first = attempt_run(&spans, &flaky_id.to_string(), 0);
    assert_eq!(
        attribute(flaky_first, "outcome").as_deref(),
        Some("retried")
    );

    // A schedule's job, even one fired from inside a traced span, and a
    // job enqueued from the command line carry no context: their attempts
    // start traces of their own.
    {
        let _request = tracing::info_span!("request", route = "/admin/run-now").entered();
        let nightly = jobqueue_core::Periodic::new("nightly", "0 3 * * *", &Step { n: 50 });
        jobqueue_core::engine::declare_schedules(&mut conn, &[nightly]).expect("declare");
        let fired = jobqueue_core::run_schedule_now(&mut conn, "nightly").expect("run now");
        assert_eq!(
            scalar(
                &mut conn,
                &format!(
                    "SELECT count(*) AS n FROM jobqueue_jobs WHERE id = '{fired}' AND traceparent IS NULL"
                ),
            ),
            1
        );
    }
    let (code, out, err) = jobqueue_tests::run_cli(
        env!("CARGO_BIN_EXE_jobqueue-test-worker"),
        &db.url,
        &["enqueue", "test.noop", r#"{"n": 7}"#],
    );
    assert_eq!(code, Some(0), "{out}{err}");
    assert_eq!(
        scalar(
            &mut conn,
            "SELECT count(*) AS n FROM jobqueue_jobs WHERE job_type = 'test.noop' AND traceparent IS NULL",
        ),
        1
    );

    // Enqueued outside any span: no enqueue span; the attempt is the root
    // of a trace of its own.
    assert!(spans_with(&spans, "enqueue", "job_id", &outside_id.to_string()).is_empty());
    let outside = attempt_run(&spans, &outside_id.to_string(), 0);
    assert_eq!(outside.parent_span_id, SpanId::INVALID);
    assert_ne!(outside.span_context.trace_id(), trace);
    assert_ne!(outside.span_context.trace_id(), TraceId::INVALID);
    assert!(outside.links.is_empty());
}
