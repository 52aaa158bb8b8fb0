//! Work middleware: the order it runs in around each attempt, the outcome
//! it may change, the payload it may rewrite, what a handler's panic does
//! to it; in a runner and in the testing kit's `perform` alike.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use jobqueue_core::{Job, JobStatus};
use jobqueue_runner::{JobContext, JobError, Middleware, Next, Perform, Registry, RunnerConfig};
use jobqueue_testing::{Outcome, perform};
use jobqueue_tests::{TestDb, read_job, start_runner, wait_for, wait_status};
use serde::{Deserialize, Serialize};

/// What the middleware and the handler did, in order (the registry's
/// state, so every attempt in the process writes to the same one).
#[derive(Default, Clone)]
struct Log(Arc<Mutex<Vec<String>>>);

impl Log {
    fn push(&self, line: String) {
        self.0.lock().expect("log").push(line);
    }

    fn lines(&self) -> Vec<String> {
        self.0.lock().expect("log").clone()
    }
}

#[derive(Serialize, Deserialize, Job)]
#[job(type = "middleware.say", queue = "middleware")]
struct Say {
    text: String,
}

impl Perform for Say {
    fn perform(&self, ctx: &mut JobContext<'_>) -> Result<(), JobError> {
        ctx.state::<Log>()?.push(format!("handler: {}", self.text));
        match self.text.as_str() {
            "flaky" => Err(JobError::Retry("flaky".into())),
            "panic" => panic!("the handler blew up"),
            _ => Ok(()),
        }
    }
}

/// Logs before and after the rest of the stack, and when a panic unwinds
/// through it.
struct Around(&'static str);

/// Logs that a panic unwound through `Around`.
struct Unwound(Arc<Log>, &'static str);

impl Drop for Unwound {
    fn drop(&mut self) {
        if std::thread::panicking() {
            self.0.push(format!("{} unwound", self.1));
        }
    }
}

impl Middleware for Around {
    fn around(&self, ctx: &mut JobContext<'_>, next: Next<'_>) -> Result<(), JobError> {
        let log = ctx.state::<Log>()?;
        log.push(format!("{} before", self.0));
        let guard = Unwound(Arc::clone(&log), self.0);
        let outcome = next.run(ctx);
        drop(guard);
        log.push(format!("{} after", self.0));
        outcome
    }
}

/// A failure worth retrying becomes one that is not.
struct NoRetry;

impl Middleware for NoRetry {
    fn around(&self, ctx: &mut JobContext<'_>, next: Next<'_>) -> Result<(), JobError> {
        next.run(ctx).map_err(|e| match e {
            JobError::Retry(why) => JobError::Fail(why),
            other => other,
        })
    }
}

/// A payload whose text was sealed (`sealed:` and the text reversed) is
/// unsealed for the handler; a `skip` is answered without the handler.
struct Unseal;

impl Middleware for Unseal {
    fn around(&self, ctx: &mut JobContext<'_>, next: Next<'_>) -> Result<(), JobError> {
        let text = next.payload()["text"].as_str().unwrap_or_default();
        if text == "skip" {
            return Ok(());
        }
        match text.strip_prefix("sealed:") {
            Some(sealed) => {
                let open: String = sealed.chars().rev().collect();
                next.run_with_payload(&serde_json::json!({ "text": open }), ctx)
            }
            None => next.run(ctx),
        }
    }
}

fn say(text: &str) -> Say {
    Say { text: text.into() }
}

/// The stack the tests run: `Around("outer")`, `Around("inner")`, then
/// whatever `more` adds, innermost.
fn registry(log: &Log, more: impl FnOnce(Registry) -> Registry) -> Registry {
    more(
        Registry::new()
            .state(log.clone())
            .middleware(Around("outer"))
            .middleware(Around("inner")),
    )
    .register::<Say>()
}

const ORDER: [&str; 5] = [
    "outer before",
    "inner before",
    "handler: hello",
    "inner after",
    "outer after",
];

#[test]
fn a_runner_runs_the_stack_around_each_attempt_in_the_order_it_was_registered() {
    let (db, mut conn) = TestDb::connected();
    let log = Log::default();
    let registry = registry(&log, |r| r.middleware(NoRetry).middleware(Unseal));
    say("sealed:olleh").enqueue(&mut conn).expect("enqueue");
    let flaky = say("flaky").enqueue(&mut conn).expect("enqueue").id();
    say("skip").enqueue(&mut conn).expect("enqueue");
    let runner = start_runner(RunnerConfig::new(&db.url).concurrency(1), registry);
    // A failure worth retrying, made one that is not by the middleware:
    // failed for good at its first attempt.
    wait_status(&mut conn, flaky, JobStatus::Failed);
    wait_for("every job's outcome", Duration::from_secs(30), || {
        runner.stats().completed == 2
    });
    let summary = runner.shutdown();
    assert_eq!(summary.stats.completed, 2, "{:?}", summary.stats);
    let failed = read_job(&mut conn, flaky);
    assert_eq!(failed.attempts, 1);
    assert_eq!(failed.last_error.as_deref(), Some("flaky"));

    // One attempt at a time (one worker): the log splits at each start.
    let lines = log.lines();
    let mut attempts: Vec<Vec<&str>> = Vec::new();
    for line in &lines {
        if line == "outer before" {
            attempts.push(Vec::new());
        }
        attempts.last_mut().expect("an attempt's start").push(line);
    }
    assert_eq!(attempts.len(), 3, "one attempt each: {lines:#?}");
    // The sealed job's handler read the payload the middleware unsealed.
    assert!(attempts.contains(&ORDER.to_vec()), "{lines:#?}");
    // The skipped job's handler never ran; the middleware around it did.
    assert!(
        attempts.contains(&vec![
            "outer before",
            "inner before",
            "inner after",
            "outer after"
        ]),
        "{lines:#?}"
    );
    assert!(
        !lines.iter().any(|line| line == "handler: skip"),
        "{lines:#?}"
    );
}

#[test]
fn the_testing_kit_runs_the_same_stack() {
    let log = Log::default();
    let registry = registry(&log, |r| r.middleware(NoRetry).middleware(Unseal));
    let done = perform(&registry, &say("sealed:olleh"))
        .run()
        .expect("performed");
    assert_eq!(done.outcome, Outcome::Completed);
    assert_eq!(log.lines(), ORDER);

    let done = perform(&registry, &say("flaky")).run().expect("performed");
    assert_eq!(
        done.outcome,
        Outcome::Failed {
            error: "flaky".into()
        }
    );
    // Without the middleware, the same failure is retried.
    let plain = Registry::new().state(Log::default()).register::<Say>();
    let done = perform(&plain, &say("flaky")).run().expect("performed");
    assert!(
        matches!(done.outcome, Outcome::Retried { .. }),
        "{:?}",
        done.outcome
    );
}

#[test]
fn a_handlers_panic_unwinds_through_the_stack_and_retries_the_job() {
    let log = Log::default();
    let registry = registry(&log, |r| r);
    let done = perform(&registry, &say("panic")).run().expect("performed");
    assert!(done.panicked);
    assert!(
        matches!(&done.outcome, Outcome::Retried { error, .. } if error.ends_with("panicked: the handler blew up")),
        "{:?}",
        done.outcome
    );
    assert_eq!(
        log.lines(),
        [
            "outer before",
            "inner before",
            "handler: panic",
            "inner unwound",
            "outer unwound"
        ]
    );
}
