//! Async handlers (`AsyncPerform`): their outcomes match a thread
//! handler's, they wait on timers without holding worker threads, their
//! futures are dropped at the deadline and on a cancel request, middleware
//! wraps them, a shutdown waits for them (and gives up on them past its
//! grace), and the testing kit runs them inline.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use jobqueue_core::{Job, JobId, JobStatus};
use jobqueue_runner::{
    AsyncPerform, JobContext, JobError, Lifecycle, Middleware, Next, Perform, Registry,
    RunnerConfig,
};
use jobqueue_testing::{Outcome, perform};
use jobqueue_tests::{TestDb, read_job, start_runner, wait_for, wait_status};
use serde::{Deserialize, Serialize};

/// What the handlers, middleware and lifecycle handlers saw (the
/// registry's state).
#[derive(Default)]
struct Seen {
    log: Mutex<Vec<String>>,
    /// Async attempts running now, and the most at once.
    running: AtomicUsize,
    most: AtomicUsize,
    /// Lets the waiting handlers return.
    release: tokio::sync::watch::Sender<bool>,
    /// A handler's future was dropped before it returned.
    dropped: AtomicUsize,
    /// A slow handler began.
    began: AtomicUsize,
}

impl Seen {
    fn push(&self, line: impl Into<String>) {
        self.log.lock().expect("log").push(line.into());
    }

    fn lines(&self) -> Vec<String> {
        self.log.lock().expect("log").clone()
    }
}

/// The test's `Seen`, from the registry's state.
fn seen(ctx: &JobContext<'_>) -> Result<Arc<Seen>, JobError> {
    Ok(Arc::clone(&*ctx.state::<Arc<Seen>>()?))
}

/// Counts a future dropped before it finished.
struct DropGuard(Arc<Seen>, bool);

impl Drop for DropGuard {
    fn drop(&mut self) {
        if !self.1 {
            self.0.dropped.fetch_add(1, Ordering::SeqCst);
        }
    }
}

#[derive(Serialize, Deserialize, Job)]
#[job(type = "async.act", queue = "async", max_attempts = 1)]
struct Act {
    what: String,
}

impl AsyncPerform for Act {
    async fn perform(&self, ctx: &mut JobContext<'_>) -> Result<(), JobError> {
        let seen = seen(ctx)?;
        // An await before the handler goes on, as an async call makes.
        tokio::task::yield_now().await;
        seen.push(format!("handler: {}", self.what));
        match self.what.as_str() {
            "retry" => Err(JobError::Retry("try again".into())),
            "fail" => Err(JobError::Fail("no use".into())),
            "panic" => panic!("the async handler blew up"),
            "progress" => ctx.progress(60, "awaited"),
            _ => Ok(()),
        }
    }
}

/// A thread handler in the same runner.
#[derive(Serialize, Deserialize, Job)]
#[job(type = "async.thread", queue = "async")]
struct OnThread;

impl Perform for OnThread {
    fn perform(&self, ctx: &mut JobContext<'_>) -> Result<(), JobError> {
        seen(ctx)?.push("thread handler");
        Ok(())
    }
}

/// Waits, awaiting a timer, until the test releases every waiter.
#[derive(Serialize, Deserialize, Job)]
#[job(type = "async.wait", queue = "async")]
struct Wait;

impl AsyncPerform for Wait {
    async fn perform(&self, ctx: &mut JobContext<'_>) -> Result<(), JobError> {
        let seen = seen(ctx)?;
        let now = seen.running.fetch_add(1, Ordering::SeqCst) + 1;
        seen.most.fetch_max(now, Ordering::SeqCst);
        let _ = seen
            .release
            .subscribe()
            .wait_for(|released| *released)
            .await;
        seen.running.fetch_sub(1, Ordering::SeqCst);
        Ok(())
    }
}

/// Awaits for a minute unless dropped; times out after 300 ms.
#[derive(Serialize, Deserialize, Job)]
#[job(type = "async.slow", queue = "async", max_attempts = 1)]
struct Slow;

impl AsyncPerform for Slow {
    const TIMEOUT: Option<Duration> = Some(Duration::from_millis(300));

    async fn perform(&self, ctx: &mut JobContext<'_>) -> Result<(), JobError> {
        sleep_unless_dropped(seen(ctx)?, Duration::from_secs(60)).await;
        Ok(())
    }
}

/// Awaits for `millis` unless dropped; no timeout.
#[derive(Serialize, Deserialize, Job)]
#[job(type = "async.long", queue = "async")]
struct Long {
    millis: u64,
}

impl AsyncPerform for Long {
    async fn perform(&self, ctx: &mut JobContext<'_>) -> Result<(), JobError> {
        sleep_unless_dropped(seen(ctx)?, Duration::from_millis(self.millis)).await;
        Ok(())
    }
}

async fn sleep_unless_dropped(seen: Arc<Seen>, how_long: Duration) {
    seen.began.fetch_add(1, Ordering::SeqCst);
    let mut guard = DropGuard(seen, false);
    tokio::time::sleep(how_long).await;
    guard.1 = true;
}

/// Counts the timeouts it is told of.
struct CountTimeouts;

impl Lifecycle for CountTimeouts {
    fn timed_out(&self, _job_id: JobId, job_type: &str) {
        // The lifecycle handler has no context: the test reads the log.
        TIMED_OUT
            .lock()
            .expect("timed out")
            .push(job_type.to_owned());
    }
}

static TIMED_OUT: Mutex<Vec<String>> = Mutex::new(Vec::new());

/// Logs around the rest of the stack.
struct Around(&'static str);

impl Middleware for Around {
    fn around(&self, ctx: &mut JobContext<'_>, next: Next<'_>) -> Result<(), JobError> {
        let seen = seen(ctx)?;
        seen.push(format!("{} before", self.0));
        let outcome = next.run(ctx);
        seen.push(format!("{} after", self.0));
        outcome
    }
}

fn registry(seen: &Arc<Seen>) -> Registry {
    Registry::new()
        .state(Arc::clone(seen))
        .register_async::<Act>()
        .register_async::<Wait>()
        .register_async::<Slow>()
        .register_async::<Long>()
        .register::<OnThread>()
}

fn config(db: &TestDb) -> RunnerConfig {
    RunnerConfig::new(&db.url)
        .queues(["async"])
        .lease(Duration::from_secs(2))
}

fn act(what: &str) -> Act {
    Act { what: what.into() }
}

#[test]
fn async_outcomes_are_those_of_thread_handlers_and_both_kinds_share_a_runner() {
    let (db, mut conn) = TestDb::connected();
    let seen = Arc::new(Seen::default());
    let ok = act("ok").enqueue(&mut conn).expect("enqueue").id();
    let progress = act("progress").enqueue(&mut conn).expect("enqueue").id();
    let retry = act("retry").enqueue(&mut conn).expect("enqueue").id();
    let fail = act("fail").enqueue(&mut conn).expect("enqueue").id();
    let panics = act("panic").enqueue(&mut conn).expect("enqueue").id();
    OnThread.enqueue(&mut conn).expect("enqueue");
    let runner = start_runner(
        config(&db)
            .concurrency(4)
            .keep_completed(Duration::from_secs(3600)),
        registry(&seen),
    );
    for id in [retry, fail, panics] {
        wait_status(&mut conn, id, JobStatus::Failed);
    }
    for id in [ok, progress] {
        wait_status(&mut conn, id, JobStatus::Completed);
    }
    wait_for("the thread handler", Duration::from_secs(30), || {
        seen.lines().iter().any(|l| l == "thread handler")
    });
    let summary = runner.shutdown();
    assert_eq!(summary.stats.completed, 3, "{:?}", summary.stats);
    assert_eq!(summary.stats.panicked, 1, "{:?}", summary.stats);
    assert_eq!(
        read_job(&mut conn, retry).last_error.as_deref(),
        Some("try again")
    );
    assert_eq!(
        read_job(&mut conn, fail).last_error.as_deref(),
        Some("no use")
    );
    let panicked = read_job(&mut conn, panics).last_error.unwrap_or_default();
    assert!(
        panicked.contains("panicked: the async handler blew up"),
        "{panicked}"
    );
    // The context works across an await: its progress was written.
    assert_eq!(read_job(&mut conn, progress).progress, 100);
    assert_eq!(
        read_job(&mut conn, progress).current_stage.as_deref(),
        Some("awaited")
    );
}

#[test]
fn a_hundred_async_jobs_wait_at_once_on_one_worker_thread() {
    let (db, mut conn) = TestDb::connected();
    let seen = Arc::new(Seen::default());
    jobqueue_tests::enqueue_all(&mut conn, (0..100).map(|_| Wait));
    let runner = start_runner(
        config(&db).concurrency(100).threads(1).async_threads(1),
        registry(&seen),
    );
    // A thread handler would hold the one worker: one at a time. An async
    // one awaits its timer on the runtime, so all hundred wait together.
    wait_for(
        "a hundred handlers awaiting at once",
        Duration::from_secs(60),
        || seen.running.load(Ordering::SeqCst) == 100,
    );
    seen.release.send_replace(true);
    wait_for("every job's outcome", Duration::from_secs(60), || {
        runner.stats().completed == 100
    });
    let summary = runner.shutdown();
    assert_eq!(seen.most.load(Ordering::SeqCst), 100);
    assert_eq!(summary.abandoned, 0);
}

#[test]
fn a_queues_own_limit_caps_its_async_jobs_as_it_caps_thread_jobs() {
    let (db, mut conn) = TestDb::connected();
    let seen = Arc::new(Seen::default());
    jobqueue_tests::enqueue_all(&mut conn, (0..20).map(|_| Wait));
    let mut config = config(&db).concurrency(50).threads(1);
    config.queue_concurrency = [("async".to_owned(), 5)].into();
    let runner = start_runner(config, registry(&seen));
    wait_for("five handlers awaiting", Duration::from_secs(60), || {
        seen.running.load(Ordering::SeqCst) >= 5
    });
    seen.release.send_replace(true);
    wait_for("every job's outcome", Duration::from_secs(60), || {
        runner.stats().completed == 20
    });
    runner.shutdown();
    assert_eq!(seen.most.load(Ordering::SeqCst), 5);
}

#[test]
fn a_future_past_its_timeout_is_dropped_and_its_attempt_fails_naming_it() {
    let (db, mut conn) = TestDb::connected();
    let seen = Arc::new(Seen::default());
    let slow = Slow.enqueue(&mut conn).expect("enqueue").id();
    let runner = start_runner(
        config(&db).concurrency(2),
        registry(&seen).lifecycle(CountTimeouts),
    );
    wait_status(&mut conn, slow, JobStatus::Failed);
    let summary = runner.shutdown();
    let error = read_job(&mut conn, slow).last_error.unwrap_or_default();
    assert!(error.starts_with("timed out"), "{error}");
    // Dropped at the deadline, not run for its minute; told once.
    assert_eq!(seen.dropped.load(Ordering::SeqCst), 1);
    let told = TIMED_OUT.lock().expect("timed out").clone();
    assert_eq!(told, ["async.slow"]);
    assert_eq!(summary.abandoned, 0);
}

#[test]
fn a_cancel_request_drops_a_running_future_and_the_job_ends_cancelled() {
    let (db, mut conn) = TestDb::connected();
    let seen = Arc::new(Seen::default());
    let long = Long { millis: 120_000 }
        .enqueue(&mut conn)
        .expect("enqueue")
        .id();
    let runner = start_runner(config(&db).concurrency(2), registry(&seen));
    wait_for("the handler to begin", Duration::from_secs(30), || {
        seen.began.load(Ordering::SeqCst) == 1
    });
    assert_eq!(
        jobqueue_core::cancel(&mut conn, long).expect("cancel"),
        jobqueue_core::CancelOutcome::Requested
    );
    // Seen at the next heartbeat (a third of the 2 s lease).
    wait_status(&mut conn, long, JobStatus::Cancelled);
    let summary = runner.shutdown();
    assert_eq!(seen.dropped.load(Ordering::SeqCst), 1);
    assert_eq!(summary.abandoned, 0);
}

#[test]
fn a_shutdown_waits_for_async_handlers_and_gives_up_on_them_past_its_grace() {
    let (db, mut conn) = TestDb::connected();
    let seen = Arc::new(Seen::default());
    // Within the grace: the handler finishes, its outcome is written.
    Long { millis: 400 }.enqueue(&mut conn).expect("enqueue");
    let runner = start_runner(config(&db).concurrency(2), registry(&seen));
    wait_for("the handler to begin", Duration::from_secs(30), || {
        seen.began.load(Ordering::SeqCst) == 1
    });
    let summary = runner.shutdown();
    assert_eq!(summary.stats.completed, 1, "{:?}", summary.stats);
    assert_eq!(summary.abandoned, 0);
    assert_eq!(seen.dropped.load(Ordering::SeqCst), 0);

    // Past the grace: counted as abandoned, its future dropped with the
    // runtime, its job left to lease expiry (still running, not lost).
    let stuck = Long { millis: 120_000 }
        .enqueue(&mut conn)
        .expect("enqueue")
        .id();
    let runner = start_runner(
        config(&db)
            .concurrency(2)
            .shutdown_grace(Duration::from_millis(300)),
        registry(&seen),
    );
    wait_for(
        "the stuck handler to begin",
        Duration::from_secs(30),
        || seen.began.load(Ordering::SeqCst) == 2,
    );
    let summary = runner.shutdown();
    assert_eq!(summary.abandoned, 1);
    wait_for("its future dropped", Duration::from_secs(10), || {
        seen.dropped.load(Ordering::SeqCst) == 1
    });
    let row = read_job(&mut conn, stuck);
    assert!(
        matches!(row.status, JobStatus::Claimed | JobStatus::Running),
        "{:?}",
        row.status
    );
}

#[test]
fn middleware_wraps_async_handlers_in_a_runner_and_in_the_kit() {
    let (db, mut conn) = TestDb::connected();
    let seen = Arc::new(Seen::default());
    let stack = |seen: &Arc<Seen>| {
        registry(seen)
            .middleware(Around("outer"))
            .middleware(Around("inner"))
    };
    let order = [
        "outer before",
        "inner before",
        "handler: wrapped",
        "inner after",
        "outer after",
    ];
    act("wrapped").enqueue(&mut conn).expect("enqueue");
    let runner = start_runner(config(&db).concurrency(2), stack(&seen));
    wait_for("the job's outcome", Duration::from_secs(30), || {
        runner.stats().completed == 1
    });
    runner.shutdown();
    assert_eq!(seen.lines(), order);

    // The kit runs the same stack inline, on the test's own thread.
    let inline = Arc::new(Seen::default());
    let done = perform(&stack(&inline), &act("wrapped"))
        .run()
        .expect("performed");
    assert_eq!(done.outcome, Outcome::Completed);
    assert_eq!(inline.lines(), order);
}

#[test]
fn the_kit_performs_an_async_handler_inside_a_single_threaded_runtime_too() {
    let seen = Arc::new(Seen::default());
    let registry = registry(&seen);
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime");
    // A `#[tokio::test]`'s runtime: it cannot block, so the attempt runs
    // on a thread of its own.
    let done =
        runtime.block_on(async { perform(&registry, &act("fail")).run().expect("performed") });
    assert_eq!(
        done.outcome,
        Outcome::Failed {
            error: "no use".into()
        }
    );
    let done = perform(&registry, &act("panic")).run().expect("performed");
    assert!(done.panicked, "{done:?}");
    assert_eq!(seen.lines(), ["handler: fail", "handler: panic"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_runner_of_async_handlers_starts_fails_and_stops_inside_an_application_runtime() {
    let db = TestDb::new();
    let seen = Arc::new(Seen::default());
    // A start that fails after the runner made its runtime (the metrics
    // address is taken) gives the error back: the runtime it made is shut
    // down, not dropped inside this async context (which would panic).
    let taken = std::net::TcpListener::bind("127.0.0.1:0").expect("a port");
    let refused = jobqueue_runner::Runner::new(
        config(&db).serve_metrics(taken.local_addr().expect("its address")),
        registry(&seen),
    )
    .start();
    assert!(refused.is_err(), "the metrics address is taken");
    // And one that starts, works and stops here.
    let mut conn = db.conn();
    act("here").enqueue(&mut conn).expect("enqueue");
    let runner = start_runner(config(&db).concurrency(2), registry(&seen));
    wait_for("the job's outcome", Duration::from_secs(30), || {
        runner.stats().completed == 1
    });
    let summary = tokio::task::block_in_place(|| runner.shutdown());
    assert_eq!(summary.stats.completed, 1);
}
