//! Async handlers' attempts (the `async` feature): each runs as a task of
//! the runner's tokio runtime, so a job that awaits a timer or a socket
//! holds no worker thread.
//!
//! A worker thread that takes a job of an async type hands it here
//! ([`spawn`]) and takes the next job. The task runs the attempt as a
//! thread's would (`attempt.rs`: the same context, outcome mapping, panic
//! catch and lifecycle calls) and hands the outcome to the completer. Its
//! job counts against the runner's `concurrency` until that outcome is
//! written, as a thread handler's does, so claims, queue limits and keys
//! hold unchanged.
//!
//! The handler's future is guarded ([`guarded`]): dropped at its next
//! await when a cancel is requested (the job ends cancelled), when the
//! lease is lost (nothing is written), or at its deadline (a retryable
//! failure naming the timeout, and the lifecycle handlers told once).
//!
//! With middleware registered, the stack is synchronous code: the task
//! runs it in `block_in_place` and the handler's future is driven inside
//! it, so such an attempt holds a runtime thread while it runs.

use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use crossbeam_channel::Sender;
use futures_util::FutureExt;

use crate::attempt;
use crate::context::JobContext;
use crate::job_error::JobError;
use crate::job_state::JobState;
use crate::messages::{Claimed, Outcome};
use crate::registry::{AsyncHandlerFn, Body, Registry};
use crate::shared::Shared;
use crate::trace::AttemptSpan;

/// Where a runner's async attempts run, and how many run now.
pub(crate) struct Tasks {
    handle: tokio::runtime::Handle,
    live: Arc<AtomicUsize>,
}

impl Tasks {
    pub(crate) fn new(handle: tokio::runtime::Handle) -> Self {
        Tasks {
            handle,
            live: Arc::new(AtomicUsize::new(0)),
        }
    }

    /// Async attempts running now.
    pub(crate) fn live(&self) -> usize {
        self.live.load(Ordering::Acquire)
    }
}

/// Counts a task as live until it ends, however it ends (a runtime shut
/// down drops it unfinished).
struct Live(Arc<AtomicUsize>);

impl Drop for Live {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

/// Starts `claimed`'s attempt as a task; its outcome goes to `outcomes`.
/// `member` is held until the task ends, so the runner's shutdown waits
/// for it as for a worker thread.
pub(crate) fn spawn(
    shared: &Arc<Shared>,
    claimed: Claimed,
    outcomes: Sender<Outcome>,
    member: Sender<()>,
) {
    let Some(tasks) = shared.tasks.get() else {
        // The runner makes its runtime whenever an async type is
        // registered: without one the job is handed back, not lost.
        log::error!(
            "job {} ({}) has an async handler but the runner has no runtime",
            claimed.state.lease.job_id,
            claimed.state.job_type
        );
        let _ = outcomes.send(Outcome::new(
            &claimed.state,
            crate::messages::OutcomeKind::Release,
        ));
        return;
    };
    tasks.live.fetch_add(1, Ordering::AcqRel);
    let live = Live(Arc::clone(&tasks.live));
    let shared = Arc::clone(shared);
    tasks.handle.spawn(async move {
        let _live = live;
        let _member = member;
        let state = &claimed.state;
        let Some(handler) = shared.registry.get(&claimed.row.job_type) else {
            // The worker found its handler: the registry does not change.
            let _ = outcomes.send(Outcome::new(state, crate::messages::OutcomeKind::Release));
            return;
        };
        state.start_async(handler.timeout.or(shared.config.default_timeout));
        let started = crate::worker::begun(&shared, state);
        let attempted = if shared.registry.stack().is_empty() {
            run(&shared, handler, &claimed).await
        } else {
            // The middleware is synchronous: it runs here, the handler's
            // future driven inside it (see `block_on`).
            tokio::task::block_in_place(|| {
                let mut ctx = JobContext::new(&shared, &claimed.row, state);
                attempt::run(
                    handler,
                    &shared.registry,
                    &claimed.row,
                    &mut ctx,
                    state,
                    shared.config.retry,
                )
            })
        };
        let kind = crate::worker::counted(&shared, state, attempted);
        crate::worker::ended(&shared, state, started, kind, &outcomes);
    });
}

/// An attempt without middleware: the handler's future, guarded, inside
/// the attempt's span, its panic caught.
async fn run(
    shared: &Shared,
    handler: &crate::registry::Handler,
    claimed: &Claimed,
) -> attempt::Attempted {
    let Body::Async(start) = &handler.body else {
        unreachable!("only async handlers' jobs are spawned as tasks");
    };
    let row = &claimed.row;
    let state = &claimed.state;
    let span = AttemptSpan::new(row);
    let mut ctx = JobContext::new(shared, row, state);
    let future = guarded(start(&row.payload, &mut ctx), state, &shared.registry);
    let result = span
        .instrument(AssertUnwindSafe(future).catch_unwind())
        .await;
    let attempted = attempt::concluded(handler, row, state, shared.config.retry, result);
    attempt::ended(&shared.registry, row, &span, &attempted);
    attempted
}

/// `future`, dropped at its next await when `state` says a cancel was
/// requested or the lease lost, or when its deadline passes.
pub(crate) async fn guarded(
    future: crate::registry::AttemptFuture<'_>,
    state: &JobState,
    registry: &Registry,
) -> Result<(), JobError> {
    let stopped = async {
        loop {
            if state.lost.load(Ordering::Relaxed) {
                return JobError::LeaseLost;
            }
            if state.cancel.load(Ordering::Relaxed) {
                return JobError::Cancelled;
            }
            state.stop.notified().await;
        }
    };
    let deadline = async {
        match state.drop_at.get() {
            Some(at) => tokio::time::sleep_until((*at).into()).await,
            None => std::future::pending().await,
        }
    };
    tokio::select! {
        biased;
        result = future => result,
        error = stopped => Err(error),
        () = deadline => Err(timed_out(state, registry)),
    }
}

/// The failure of an async attempt dropped at its deadline; the lifecycle
/// handlers are told once.
fn timed_out(state: &JobState, registry: &Registry) -> JobError {
    let ran = state.started().map(|at| at.elapsed()).unwrap_or_default();
    if !state.timed_out.swap(true, Ordering::AcqRel) {
        log::warn!(
            "job {} ({}) ran past its timeout: its handler's future was dropped",
            state.lease.job_id,
            state.job_type
        );
        crate::lifecycle::call_timed_out(
            registry.lifecycle_handlers(),
            state.lease.job_id,
            &state.job_type,
        );
    }
    JobError::Retry(format!(
        "timed out: the async handler ran {:.1} s, past its timeout, and was stopped at an await",
        ran.as_secs_f64()
    ))
}

/// Runs an async handler from synchronous code (inside middleware, or
/// inline for the testing kit) to its end: on the current runtime's thread
/// if it is a multi-threaded one (in `block_in_place`), else on a runtime
/// of the calling thread's own, or of a scoped thread's when the caller is
/// inside a single-threaded runtime (which cannot block).
pub(crate) fn block_on(
    start: &AsyncHandlerFn,
    payload: &serde_json::Value,
    ctx: &mut JobContext<'_>,
) -> Result<(), JobError> {
    let state = ctx.job_state();
    let registry = ctx.registry();
    let future = guarded(start(payload, ctx), state, registry);
    match tokio::runtime::Handle::try_current() {
        Ok(handle) if handle.runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread => {
            tokio::task::block_in_place(|| handle.block_on(future))
        }
        Ok(_) => std::thread::scope(
            |scope| match scope.spawn(|| on_own_runtime(future)).join() {
                Ok(result) => result,
                Err(panic) => std::panic::resume_unwind(panic),
            },
        ),
        Err(_) => on_own_runtime(future),
    }
}

/// `future` run to its end on a runtime of this thread's own.
fn on_own_runtime(
    future: impl std::future::Future<Output = Result<(), JobError>>,
) -> Result<(), JobError> {
    thread_local! {
        static RUNTIME: Result<tokio::runtime::Runtime, String> =
            tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .map_err(|e| e.to_string());
    }
    RUNTIME.with(|runtime| match runtime {
        Ok(runtime) => runtime.block_on(future),
        Err(e) => Err(JobError::Retry(format!(
            "cannot start a runtime for an async handler: {e}"
        ))),
    })
}
