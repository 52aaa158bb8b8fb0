//! Worker threads: run handlers, catch their panics, hand outcomes to the
//! completer.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use crossbeam_channel::Sender;

use crate::attempt;
use crate::context::JobContext;
use crate::counters::Counters;
use crate::dispatch::JobReceiver;
use crate::messages::{Claimed, Outcome, OutcomeKind};
use crate::shared::Shared;

pub(crate) fn run(shared: Arc<Shared>, jobs: JobReceiver, outcomes: Sender<Outcome>) {
    while let Some(claimed) = jobs.recv() {
        if shared.is_stopping() {
            let _ = outcomes.send(Outcome::new(&claimed.state, OutcomeKind::Release));
            continue;
        }
        if claimed
            .state
            .start_by
            .is_some_and(|by| std::time::Instant::now() > by)
        {
            // Started this late, it could break its queue's rate limit as
            // the handlers' starts show it: handed back, claimed again
            // later.
            log::debug!(
                "job {} ({}) of a rate-limited queue handed back: no worker started it \
                 within the limit's margin of its claim",
                claimed.state.lease.job_id,
                claimed.state.job_type
            );
            crate::counters::Counters::add(&shared.counters.late_starts, 1);
            let _ = outcomes.send(Outcome::new(&claimed.state, OutcomeKind::Release));
            continue;
        }
        let started = std::time::Instant::now();
        shared
            .last_start
            .store(shared.micros_now(), Ordering::Relaxed);
        let metrics = claimed.state.metrics.as_deref();
        if let Some(metrics) = metrics {
            metrics.started_after(claimed.state.queue_time());
            shared.busy_workers.fetch_add(1, Ordering::Relaxed);
        }
        let kind = execute(&shared, &claimed);
        if metrics.is_some() {
            shared.busy_workers.fetch_sub(1, Ordering::Relaxed);
        }
        let took = started.elapsed();
        shared.note_job_time(took);
        if let Some(metrics) = metrics {
            metrics.handler_ran(took);
        }
        let _ = outcomes.send(Outcome::new(&claimed.state, kind));
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
}

/// Runs the job's handler and turns what happened into an outcome.
fn execute(shared: &Shared, claimed: &Claimed) -> OutcomeKind {
    let row = &claimed.row;
    let state = &claimed.state;
    let Some(handler) = shared.registry.get(&row.job_type) else {
        // The fetcher sets such jobs aside before they reach a worker.
        return OutcomeKind::Park;
    };
    state.start(handler.timeout.or(shared.config.default_timeout));
    let mut ctx = JobContext::new(shared, row, state);
    let attempted = attempt::run(
        handler,
        &shared.registry,
        row,
        &mut ctx,
        state,
        shared.config.retry,
    );
    drop(ctx);
    if attempted.panicked {
        Counters::add(&shared.counters.panicked, 1);
        if let Some(metrics) = &state.metrics {
            metrics.panicked();
        }
    }
    OutcomeKind::from(attempted.outcome)
}
