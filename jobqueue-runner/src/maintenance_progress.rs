//! Where the maintenance thread is, for the lease keeper to report with
//! the runner's presence (`jobqueue_runners.maintained_at`,
//! `maintenance_pass`): when the last pass ended, and the pass under way.
//! The doctor's `maintenance` check reads them, so a pass that never ends
//! shows up although the runner itself stays alive.

use std::sync::Mutex;
use std::time::{Duration, Instant};

/// The maintenance thread's progress, written by the scheduler and read
/// by the lease keeper.
#[derive(Debug)]
pub(crate) struct MaintenanceProgress {
    state: Mutex<State>,
}

#[derive(Debug, Clone, Copy)]
struct State {
    /// When the last pass ended (the runner's start before the first).
    ended: Instant,
    /// The service whose pass runs now.
    running: Option<&'static str>,
}

impl Default for MaintenanceProgress {
    fn default() -> Self {
        MaintenanceProgress {
            state: Mutex::new(State {
                ended: Instant::now(),
                running: None,
            }),
        }
    }
}

impl MaintenanceProgress {
    /// A pass of service `name` begins.
    pub(crate) fn begin(&self, name: &'static str) {
        self.with(|state| state.running = Some(name));
    }

    /// The pass under way ended.
    pub(crate) fn end(&self) {
        self.with(|state| {
            state.ended = Instant::now();
            state.running = None;
        });
    }

    /// How long since the last pass ended, and the pass under way.
    pub(crate) fn read(&self) -> (Duration, Option<&'static str>) {
        let mut read = (Duration::ZERO, None);
        self.with(|state| read = (state.ended.elapsed(), state.running));
        read
    }

    /// Runs `f` on the state. A poisoned lock is used as it is: the state
    /// is two plain values that a panic cannot leave half-written.
    fn with(&self, f: impl FnOnce(&mut State)) {
        let mut state = self
            .state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        f(&mut state);
    }
}
