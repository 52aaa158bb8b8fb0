//! A handler's start and end as the runner notes them, for thread and
//! async handlers alike: the last start, the queue time and busy count of
//! its metrics, its run time, its panic counted, and its outcome handed to
//! the completer.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Instant;

use crossbeam_channel::Sender;

use crate::attempt;
use crate::counters::Counters;
use crate::job_state::JobState;
use crate::messages::{Outcome, OutcomeKind};
use crate::shared::Shared;

/// Notes that a handler starts now: the runner's last start, and with
/// metrics its queue time and the busy count.
pub(crate) fn begun(shared: &Shared, state: &JobState) -> Instant {
    shared
        .last_start
        .store(shared.micros_now(), Ordering::Relaxed);
    if let Some(metrics) = state.metrics.as_deref() {
        metrics.started_after(state.queue_time());
        shared.busy_workers.fetch_add(1, Ordering::Relaxed);
    }
    Instant::now()
}

/// Notes that a handler begun at `started` returned with `kind`, and hands
/// the outcome to the completer.
pub(crate) fn ended(
    shared: &Shared,
    state: &Arc<JobState>,
    started: Instant,
    kind: OutcomeKind,
    outcomes: &Sender<Outcome>,
) {
    let metrics = state.metrics.as_deref();
    if metrics.is_some() {
        shared.busy_workers.fetch_sub(1, Ordering::Relaxed);
    }
    let took = started.elapsed();
    shared.note_job_time(took);
    if let Some(metrics) = metrics {
        metrics.handler_ran(took);
    }
    let _ = outcomes.send(Outcome::new(state, kind));
}

/// An attempt's outcome, its panic counted.
pub(crate) fn counted(
    shared: &Shared,
    state: &JobState,
    attempted: attempt::Attempted,
) -> OutcomeKind {
    if attempted.panicked {
        Counters::add(&shared.counters.panicked, 1);
        if let Some(metrics) = &state.metrics {
            metrics.panicked();
        }
    }
    OutcomeKind::from(attempted.outcome)
}
