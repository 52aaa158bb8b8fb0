//! Async handlers' attempts (the `async` feature): each runs as a task of
//! the runner's tokio runtime, so a job that awaits a timer or a socket
//! holds no worker thread.
//!
//! A worker thread that takes a job of an async type spawns its attempt
//! ([`attempt`]) on the runtime and takes the next job (`worker.rs`). The
//! task runs the attempt as a thread's would (`attempt.rs`: the same context, outcome mapping, panic
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

use futures_util::FutureExt;

use crate::attempt::{self, Attempted};
use crate::context::JobContext;
use crate::messages::Claimed;
use crate::registry::{Body, Handler};
use crate::shared::Shared;
use crate::trace::AttemptSpan;

/// `claimed`'s attempt with `handler`, an async one: its future awaited
/// on this task, or, with middleware registered, the synchronous stack run
/// in place with the future driven inside it (see `async_drive::block_on`).
pub(crate) async fn attempt(shared: &Shared, handler: &Handler, claimed: &Claimed) -> Attempted {
    let (row, state) = (&claimed.row, &claimed.state);
    match &handler.body {
        Body::Async(start) if shared.registry.stack().is_empty() => {
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
        _ => tokio::task::block_in_place(|| attempt::run_held(shared, handler, row, state)),
    }
}
