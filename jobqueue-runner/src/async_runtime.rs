//! The runtime a runner's async handlers run on (the `async` feature),
//! and how many of their attempts run now.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

/// Where a runner's async attempts run, and how many run now.
pub(crate) struct Tasks {
    pub(crate) handle: tokio::runtime::Handle,
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

    /// One more attempt runs, until the returned guard is dropped.
    pub(crate) fn one_more(&self) -> Live {
        self.live.fetch_add(1, Ordering::AcqRel);
        Live(Arc::clone(&self.live))
    }
}

/// Counts a task as live until it ends, however it ends (a runtime shut
/// down drops it unfinished).
pub(crate) struct Live(Arc<AtomicUsize>);

impl Drop for Live {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

/// The runtime a runner made for its async handlers. Dropped (a runner
/// stopped, or one whose start failed after making it), it is shut down
/// without waiting: dropping a runtime inside an async context, where an
/// application may start and stop its runner, would panic.
pub(crate) struct OwnRuntime(Option<tokio::runtime::Runtime>);

impl OwnRuntime {
    pub(crate) fn new(runtime: tokio::runtime::Runtime) -> Self {
        OwnRuntime(Some(runtime))
    }
}

impl Drop for OwnRuntime {
    fn drop(&mut self) {
        if let Some(runtime) = self.0.take() {
            runtime.shutdown_background();
        }
    }
}
