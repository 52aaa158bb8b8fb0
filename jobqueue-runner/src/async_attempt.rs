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
//! The handler's future is guarded (`async_drive.rs`): dropped at its next
//! await when a cancel is requested (the job ends cancelled), when the
//! lease is lost (nothing is written), or at its deadline (a retryable
//! failure naming the timeout, and the lifecycle handlers told once).
//!
//! With middleware registered, the stack is synchronous code: the task
//! runs it in `block_in_place` and the handler's future is driven inside
//! it, so such an attempt holds a runtime thread while it runs.

use std::panic::AssertUnwindSafe;
use std::sync::Arc;

use crossbeam_channel::Sender;
use futures_util::FutureExt;

use crate::attempt;
use crate::context::JobContext;
use crate::messages::{Claimed, Outcome};
use crate::registry::Body;
use crate::shared::Shared;
use crate::trace::AttemptSpan;

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
    let live = tasks.one_more();
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
        let started = crate::handler_clock::begun(&shared, state);
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
        let kind = crate::handler_clock::counted(&shared, state, attempted);
        crate::handler_clock::ended(&shared, state, started, kind, &outcomes);
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
    let future =
        crate::async_drive::guarded(start(&row.payload, &mut ctx), state, &shared.registry);
    let result = span
        .instrument(AssertUnwindSafe(future).catch_unwind())
        .await;
    let attempted = attempt::concluded(handler, row, state, shared.config.retry, result);
    attempt::ended(&shared.registry, row, &span, &attempted);
    attempted
}
