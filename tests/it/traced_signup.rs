//! The traced example (`examples/traced_signup.rs`) as two processes: the
//! web process enqueues inside its request's span and exports the request
//! and enqueue spans; the worker process, started afterwards, exports the
//! job's attempt in the same trace, a child of that enqueue, with the
//! handler's span under it. What crosses between them is the job's row.

use std::process::Command;

use jobqueue_tests::example::{example_binary, start_worker};
use jobqueue_tests::{TestDb, WAIT_LIMIT, assert_success};

/// A span as OpenTelemetry's stdout exporter prints it.
#[derive(Debug, Default, Clone)]
struct Printed {
    name: String,
    trace: String,
    span: String,
    parent: String,
}

/// The spans in an exporter's output: each `Span #N` block's own
/// (one-tab) `Name`, `TraceId`, `SpanId` and `ParentSpanId` lines, the
/// first of each (an event's `Name` comes later in its span's block).
fn printed_spans(output: &str) -> Vec<Printed> {
    let mut spans: Vec<Printed> = Vec::new();
    for line in output.lines() {
        if line.starts_with("Span #") {
            spans.push(Printed::default());
            continue;
        }
        let (Some(span), Some(field)) = (spans.last_mut(), line.strip_prefix('\t')) else {
            continue;
        };
        let Some((key, value)) = field.split_once(':') else {
            continue;
        };
        let field = match key.trim_end() {
            "Name" => &mut span.name,
            "TraceId" => &mut span.trace,
            "SpanId" => &mut span.span,
            "ParentSpanId" => &mut span.parent,
            _ => continue,
        };
        if field.is_empty() {
            *field = value.trim().to_owned();
        }
    }
    spans
}

/// The one span named `name`.
fn named<'a>(spans: &'a [Printed], name: &str) -> &'a Printed {
    let found: Vec<_> = spans.iter().filter(|s| s.name == name).collect();
    assert_eq!(found.len(), 1, "one {name} span: {spans:#?}");
    found[0]
}

#[test]
fn a_signup_trace_continues_in_the_worker_process() {
    let db = TestDb::new();
    let example = example_binary("traced_signup");

    let signup = Command::new(&example)
        .args(["sign-up", "a@example.com"])
        .env("DATABASE_URL", &db.url)
        .output()
        .expect("run the sign-up");
    assert_success("sign-up", &signup);
    let web_output = String::from_utf8_lossy(&signup.stdout);
    let trace = web_output
        .lines()
        .find_map(|line| line.strip_prefix("trace "))
        .unwrap_or_else(|| panic!("no trace id printed:\n{web_output}"))
        .to_owned();
    let web = printed_spans(&web_output);
    let request = named(&web, "POST /signup");
    let enqueue = named(&web, "enqueue");
    assert_eq!(
        (request.trace.as_str(), enqueue.trace.as_str()),
        (trace.as_str(), trace.as_str())
    );
    assert_eq!(enqueue.parent, request.span);

    let (mut worker, received) = start_worker(&example, &db.url, &[]);
    let mut worker_output = String::new();
    let attempt = loop {
        let line = received.recv_timeout(WAIT_LIMIT).unwrap_or_else(|e| {
            let _ = worker.kill();
            panic!("no attempt span from the worker ({e}):\n{worker_output}")
        });
        worker_output.push_str(&line);
        worker_output.push('\n');
        // A span's block ends with its (tab-indented) fields; the attempt's
        // is complete once the next block, or its `Kind` line, is printed.
        let spans = printed_spans(&worker_output);
        if line.starts_with("\tKind")
            && let Some(attempt) = spans.iter().find(|s| s.name == "attempt")
        {
            break attempt.clone();
        }
    };
    let status = Command::new("kill")
        .args(["-TERM", &worker.id().to_string()])
        .status()
        .expect("run kill");
    assert!(status.success());
    let exit = worker.wait().expect("wait for the worker");
    assert!(
        exit.success(),
        "the worker exits cleanly on SIGTERM: {exit}"
    );

    let worker_spans = printed_spans(&worker_output);
    let render = named(&worker_spans, "render");
    assert_eq!(attempt.trace, trace, "{worker_output}");
    assert_eq!(
        attempt.parent, enqueue.span,
        "the attempt's parent is the enqueue"
    );
    assert_eq!(render.trace, trace);
    assert_eq!(render.parent, attempt.span);
}
