//! Worker threads: run handlers, catch their panics, hand outcomes to the
//! completer. A job whose handler is async is handed to the runner's
//! runtime as a task (`async_attempt.rs`), and the thread takes the next.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Instant;

use crossbeam_channel::Sender;

use crate::attempt;
use crate::counters::Counters;
use crate::dispatch::JobReceiver;
use crate::job_state::JobState;
use crate::messages::{Claimed, Outcome, OutcomeKind};
use crate::registry::{Body, Handler};
use crate::shared::Shared;

/// A worker thread's loop; `member` is held until it ends (and lent to the
/// async tasks it starts), so the runner's shutdown sees when every
/// handler has returned.
pub(crate) fn run(
    shared: Arc<Shared>,
    jobs: JobReceiver,
    outcomes: Sender<Outcome>,
    member: Sender<()>,
) {
    while let Some(claimed) = jobs.recv() {
        if let Some(kind) = unstartable(&shared, &claimed) {
            let _ = outcomes.send(Outcome::new(&claimed.state, kind));
            continue;
        }
        let Some(handler) = shared.registry.get(&claimed.row.job_type) else {
            // The fetcher sets such jobs aside before they reach a worker.
            let _ = outcomes.send(Outcome::new(&claimed.state, OutcomeKind::Park));
            continue;
        };
        match &handler.body {
            Body::Thread(_) => {}
            #[cfg(feature = "async")]
            Body::Async(_) => {
                spawn_async(&shared, claimed, outcomes.clone(), member.clone());
                continue;
            }
        }
        // The lease keeper watches the handler's timeout from now.
        claimed
            .state
            .start(handler.timeout.or(shared.config.default_timeout));
        let started = begun(&shared, &claimed.state);
        let kind = execute(&shared, &claimed, handler);
        ended(&shared, &claimed.state, started, kind, &outcomes);
        if claimed.state.abandoned.load(Ordering::Acquire) {
            // Replaced by a new worker while this handler overran: bow out.
            log::warn!(
                "job {} ({}) finally returned after it was abandoned",
                claimed.state.lease.job_id,
                claimed.state.job_type
            );
            return;
        }
    }
    drop(member);
}

/// Why a claimed job is handed back unstarted, if it is: the runner is
/// stopping, or a rate-limited queue's job came too late to start.
fn unstartable(shared: &Shared, claimed: &Claimed) -> Option<OutcomeKind> {
    if shared.is_stopping() {
        return Some(OutcomeKind::Release);
    }
    if claimed.state.start_by.is_some_and(|by| Instant::now() > by) {
        // Started this late, it could break its queue's rate limit as
        // the handlers' starts show it: handed back, claimed again
        // later.
        log::debug!(
            "job {} ({}) of a rate-limited queue handed back: no worker started it \
             within the limit's margin of its claim",
            claimed.state.lease.job_id,
            claimed.state.job_type
        );
        Counters::add(&shared.counters.late_starts, 1);
        return Some(OutcomeKind::Release);
    }
    None
}

/// Runs the job's handler and turns what happened into an outcome.
fn execute(shared: &Shared, claimed: &Claimed, handler: &Handler) -> OutcomeKind {
    let attempted = attempt::run_held(shared, handler, &claimed.row, &claimed.state);
    counted(shared, &claimed.state, attempted)
}

/// Starts `claimed`'s attempt, of an async handler, as a task of the
/// runner's runtime; its outcome goes to `outcomes`. `member` is held
/// until the task ends, so the runner's shutdown waits for it as for a
/// worker thread.
#[cfg(feature = "async")]
fn spawn_async(
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
        let _ = outcomes.send(Outcome::new(&claimed.state, OutcomeKind::Release));
        return;
    };
    let live = tasks.one_more();
    let shared = Arc::clone(shared);
    tasks.handle.spawn(async move {
        let (_live, _member) = (live, member);
        let state = &claimed.state;
        let Some(handler) = shared.registry.get(&claimed.row.job_type) else {
            // The worker found its handler: the registry does not change.
            let _ = outcomes.send(Outcome::new(state, OutcomeKind::Release));
            return;
        };
        state.start_async(handler.timeout.or(shared.config.default_timeout));
        let started = begun(&shared, state);
        let attempted = crate::async_attempt::attempt(&shared, handler, &claimed).await;
        let kind = counted(&shared, state, attempted);
        ended(&shared, state, started, kind, &outcomes);
    });
}

/// Notes that a handler starts now: the runner's last start, and with
/// metrics its queue time and the busy count.
fn begun(shared: &Shared, state: &JobState) -> Instant {
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
fn ended(
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
fn counted(shared: &Shared, state: &JobState, attempted: attempt::Attempted) -> OutcomeKind {
    if attempted.panicked {
        Counters::add(&shared.counters.panicked, 1);
        if let Some(metrics) = &state.metrics {
            metrics.panicked();
        }
    }
    OutcomeKind::from(attempted.outcome)
}
