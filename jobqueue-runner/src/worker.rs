//! Worker threads: run handlers, catch their panics, hand outcomes to the
//! completer. A job whose handler is async is handed to the runner's
//! runtime as a task (`async_attempt.rs`), and the thread takes the next.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Instant;

use crossbeam_channel::Sender;

use crate::attempt;
use crate::context::JobContext;
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
                crate::async_attempt::spawn(&shared, claimed, outcomes.clone(), member.clone());
                continue;
            }
        }
        state_start(&shared, handler, &claimed.state);
        let started = crate::handler_clock::begun(&shared, &claimed.state);
        let kind = execute(&shared, &claimed, handler);
        crate::handler_clock::ended(&shared, &claimed.state, started, kind, &outcomes);
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

/// Starts a thread handler's clock: its timeout is watched by the lease
/// keeper from now.
fn state_start(shared: &Shared, handler: &Handler, state: &JobState) {
    state.start(handler.timeout.or(shared.config.default_timeout));
}

/// Runs the job's handler and turns what happened into an outcome.
fn execute(shared: &Shared, claimed: &Claimed, handler: &Handler) -> OutcomeKind {
    let row = &claimed.row;
    let state = &claimed.state;
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
    crate::handler_clock::counted(shared, state, attempted)
}
