//! An async handler's future guarded and driven (the `async` feature):
//! dropped at its next await on a cancel request, a lost lease or its
//! deadline ([`guarded`]); run to its end from synchronous code, inside
//! middleware or inline for the testing kit ([`block_on`]).

use std::sync::atomic::Ordering;

use crate::context::JobContext;
use crate::job_error::JobError;
use crate::job_state::JobState;
use crate::registry::{AsyncHandlerFn, AttemptFuture, Registry};

/// `future`, dropped at its next await when `state` says a cancel was
/// requested or the lease lost, or when its deadline passes.
pub(crate) async fn guarded(
    future: AttemptFuture<'_>,
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
