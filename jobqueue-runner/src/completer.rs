//! The completer: writes outcomes in batches — one statement per kind per
//! flush — and retries a flush until the database takes it. A job's slot in
//! the runner is free only once its outcome is written: a slow database
//! makes the runner claim less, never more. The statements of a flush,
//! one per kind of outcome, are the table `WRITES` after the loop.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, select};
use jobqueue_core::engine::{
    Beat, FailOutcome, Failure, Fenced, Progress, QueueKey, QueueSession, Snooze, StepDone,
};
use jobqueue_core::{JobId, JobStatus};

use crate::backoff::Backoff;
use crate::claimer::Claimer;
use crate::counters::Counters;
use crate::db::Db;
use crate::job_state::put_back_progress;
use crate::messages::{Outcome, OutcomeKind};
use crate::metrics::Outcome as Ended;
use crate::progress_note::InFlight;
use crate::shared::Shared;
use crate::trace::FlushSpan;

/// What the completer waits for next.
enum Next {
    /// An outcome to write.
    Outcome(Outcome),
    /// Shutdown began: from now on, wait only until the grace deadline.
    ShutdownBegan,
    /// Every sender is gone (workers, fetcher, handle), or the grace period
    /// ran out with handlers still running: write what is left and stop.
    Done,
}

/// Runs until the outcome channel disconnects, or, once shutdown began,
/// until the grace deadline; refused flushes are retried until the
/// runner's stop deadline (the grace period plus the database timeout).
pub(crate) fn run(shared: Arc<Shared>, claimer: &Claimer, outcomes: Receiver<Outcome>) {
    let mut db = Db::new(&shared, "completer");
    let mut backoff = Backoff::new();
    let mut pending: Vec<Outcome> = Vec::new();
    let batch = shared.config.completion_batch;
    let mut done = false;
    loop {
        if pending.is_empty() {
            if done {
                break;
            }
            let next = match shared.grace_deadline() {
                None => select! {
                    recv(outcomes) -> msg => msg.map_or(Next::Done, Next::Outcome),
                    recv(shared.shutdown) -> _ => Next::ShutdownBegan,
                },
                Some(deadline) => outcomes
                    .recv_deadline(deadline)
                    .map_or(Next::Done, Next::Outcome),
            };
            match next {
                Next::Outcome(outcome) => pending.push(outcome),
                Next::ShutdownBegan => continue,
                Next::Done => {
                    done = true;
                    // Whatever is already queued is written before stopping.
                    pending.extend(outcomes.try_iter());
                    if pending.is_empty() {
                        break;
                    }
                }
            }
        }
        while pending.len() < batch {
            match outcomes.try_recv() {
                Ok(outcome) => pending.push(outcome),
                Err(_) => break,
            }
        }
        flush(&shared, claimer, &mut db, &mut pending);
        if pending.is_empty() {
            backoff.reset();
            continue;
        }
        // The database refused the flush: wait, then try again.
        let give_up = shared.stop_deadline();
        if give_up.is_some_and(|at| Instant::now() >= at) {
            log::error!(
                "shutting down with {} outcomes unwritten: their leases will expire and the jobs run again",
                pending.len()
            );
            break;
        }
        let delay = backoff.next_delay();
        if give_up.is_some() {
            std::thread::sleep(delay.min(Duration::from_millis(200)));
        } else {
            // Wakes early when shutdown begins.
            crate::backoff::stopped_within(&shared.shutdown, delay);
        }
    }
    log::debug!("completer stopped");
}

/// Writes every pending outcome, one statement per kind; what was written
/// leaves `pending` and frees its job's slot, what the database refused
/// stays for the next flush.
fn flush(shared: &Shared, claimer: &Claimer, db: &mut Db, pending: &mut Vec<Outcome>) {
    let before = pending.len();
    let span = FlushSpan::enter(before);
    let keys = keys_of(pending);
    let may_end: Vec<JobId> = pending
        .iter()
        .filter(|outcome| may_end_step(outcome))
        .map(|outcome| outcome.state.lease.job_id)
        .collect();
    write_all(shared, claimer, db, pending);
    span.written(before - pending.len());
    if !keys.is_empty() {
        // An outcome that keeps its job's place, a retry or a snooze,
        // admits nothing. The admitter admits; this flush does not wait.
        claimer.keys_finished(keys);
    }
    if !may_end.is_empty() {
        settle_step_ends(shared, claimer, db, &may_end);
    }
}

/// Whether `outcome` may end a workflow step otherwise than by completing
/// it: a failure (for good once attempts run out), a cancellation, a
/// snooze (failed past the most snoozes).
fn may_end_step(outcome: &Outcome) -> bool {
    outcome.state.workflow
        && matches!(
            outcome.kind,
            OutcomeKind::Fail { .. }
                | OutcomeKind::Cancelled
                | OutcomeKind::Snooze(_)
                | OutcomeKind::RateLimited(_)
        )
}

/// Settles the workflow steps of `jobs` that failed for good or were
/// cancelled (the others are passed over), in transactions after the
/// outcomes': the steps after them are cancelled, released or left waiting
/// as their workflows say. A failure, or an outcome not written yet,
/// leaves them to the maintenance's pass (`maintenance/workflow_ends.rs`).
fn settle_step_ends(shared: &Shared, claimer: &Claimer, db: &mut Db, jobs: &[JobId]) {
    match db.run(&shared.health, |session| session.settle_ended_of(jobs)) {
        Ok(settled) if settled.ended > 0 => claimer.wake(),
        Ok(_) => {}
        Err(e) => log::debug!("settling the ends of workflow steps failed: {e}"),
    }
}

/// The concurrency keys of the jobs of `pending`, each once.
fn keys_of(pending: &[Outcome]) -> Vec<QueueKey> {
    let mut keys: Vec<QueueKey> = pending
        .iter()
        .filter_map(|outcome| outcome.state.key.clone())
        .collect();
    keys.sort_unstable();
    keys.dedup();
    keys
}

/// [`flush`], inside its span.
fn write_all(shared: &Shared, claimer: &Claimer, db: &mut Db, pending: &mut Vec<Outcome>) {
    // The unwritten reports go first, with the outcomes. An outcome whose
    // job's reports a heartbeat is writing waits for that write to return
    // (written, or given back to go with the outcome).
    let deletes = shared.config.retention.deletes_completed();
    let mut held = Vec::new();
    let mut ready = Vec::new();
    let mut notes = Vec::new();
    for outcome in pending.drain(..) {
        if !carries_progress(&outcome, deletes) {
            ready.push(outcome);
            continue;
        }
        match outcome.state.progress.take_unless_in_flight() {
            Err(InFlight) => held.push(outcome),
            Ok(note) => {
                if let Some(progress) = note {
                    notes.push((ready.len(), progress));
                }
                ready.push(outcome);
            }
        }
    }
    // The notes go first: an outcome written without them (on the
    // connection opened again after this one failed) would leave its row
    // showing older progress for good. Both wait for the next flush.
    if write_progress(shared, db, &ready, notes) {
        write_ready(shared, claimer, db, &mut ready);
    }
    pending.extend(ready);
    pending.extend(held);
}

/// Whether `outcome` writes its job's unwritten reports with it: not when
/// its row goes (a completion that deletes it leaves nothing to show them
/// on), nor for a job never started, set aside, completed by its handler
/// (with its reports) or not ours.
fn carries_progress(outcome: &Outcome, deletes: bool) -> bool {
    match outcome.kind {
        OutcomeKind::Complete => !deletes,
        OutcomeKind::Fail { .. }
        | OutcomeKind::Snooze(_)
        | OutcomeKind::RateLimited(_)
        | OutcomeKind::Cancelled => true,
        OutcomeKind::Release | OutcomeKind::Park | OutcomeKind::Handled | OutcomeKind::Lost => {
            false
        }
    }
}

/// Writes the outcomes of `pending` whose reports went before them (see
/// [`write_all`]): counts those with nothing to write, then one statement
/// per kind.
fn write_ready(shared: &Shared, claimer: &Claimer, db: &mut Db, pending: &mut Vec<Outcome>) {
    // Nothing to write for these: counted, and out.
    for outcome in pending.iter() {
        match outcome.kind {
            OutcomeKind::Handled => Counters::add(&shared.counters.completed, 1),
            OutcomeKind::Lost => Counters::add(&shared.counters.lost, 1),
            _ => {}
        }
    }
    count_ended(shared, pending, is_handled_or_lost, &[], |_| {
        Ended::Completed
    });
    finish(shared, claimer, pending, is_handled_or_lost);
    // One statement per kind; one that fails leaves its outcomes for the
    // next flush.
    for write in &WRITES {
        let written = {
            let outcomes: Vec<&Outcome> = pending.iter().filter(|o| (write.takes)(o)).collect();
            if outcomes.is_empty() {
                continue;
            }
            db.run(&shared.health, |session| {
                (write.run)(shared, session, &outcomes)
            })
        };
        if let Ok(written) = written {
            count_written(shared, pending, write, written);
            finish(shared, claimer, pending, write.takes);
        }
    }
}

/// Counts what a statement made of the outcomes it wrote (those lost
/// noted, as `write.what`s not written).
fn count_written(shared: &Shared, pending: &[Outcome], write: &Write, written: Written) {
    let counters = &shared.counters;
    match written {
        Written::Fenced(done, ended) => {
            Counters::add(counters.of(ended), done.applied.len());
            note_lost(shared, write.what, &done.lost);
            count_ended(shared, pending, write.takes, &done.lost, |_| ended);
        }
        Written::Reported { ended, lost, usual } => {
            for (_, how) in &ended {
                Counters::add(counters.of(*how), 1);
            }
            note_lost(shared, write.what, &lost);
            if shared.metrics.is_some() {
                let by_id: HashMap<JobId, Ended> = ended.into_iter().collect();
                count_ended(shared, pending, write.takes, &lost, |id| {
                    by_id.get(&id).copied().unwrap_or(usual)
                });
            }
        }
    }
}

/// Takes the outcomes `of_kind` out of `pending`: written (or lost), their
/// jobs no longer count against the runner's capacity.
fn finish(
    shared: &Shared,
    claimer: &Claimer,
    pending: &mut Vec<Outcome>,
    of_kind: fn(&Outcome) -> bool,
) {
    pending.retain(|outcome| {
        if of_kind(outcome) {
            claimer.finished(&shared.inflight, &outcome.state);
            false
        } else {
            true
        }
    });
}

/// Writes, in one heartbeat statement before the outcomes, the reports
/// `notes` took (each with the index of its outcome in `ready`). If the
/// statement fails the notes are given back for the next flush; false if
/// it failed for want of a connection: the outcomes wait too.
fn write_progress(
    shared: &Shared,
    db: &mut Db,
    ready: &[Outcome],
    notes: Vec<(usize, Progress)>,
) -> bool {
    if notes.is_empty() {
        return true;
    }
    let (outcomes, beats): (Vec<&Outcome>, Vec<Beat>) = notes
        .into_iter()
        .map(|(at, progress)| {
            let outcome = &ready[at];
            let beat = Beat {
                lease: outcome.lease(),
                progress: Some(progress),
                events_base: Some(outcome.state.events_base),
            };
            (outcome, beat)
        })
        .unzip();
    let written = db.run(&shared.health, |session| {
        session.heartbeat_with_progress(&beats, shared.config.lease)
    });
    if written.is_ok() {
        for outcome in &outcomes {
            outcome.state.progress.written();
        }
        return true;
    }
    put_back_progress(outcomes.into_iter().map(|outcome| &*outcome.state), beats);
    // Without a connection nothing else would be written either; an error
    // of the statement itself must not hold the outcomes back.
    !db.lost_connection()
}

fn is_handled_or_lost(outcome: &Outcome) -> bool {
    matches!(outcome.kind, OutcomeKind::Handled | OutcomeKind::Lost)
}

/// Counts in the metrics of each job's queue and type (when kept) what the
/// statement just written made of the outcomes `of_kind`: `lost` ones (and
/// `OutcomeKind::Lost`) as lease lost, the others as `ended` says.
fn count_ended(
    shared: &Shared,
    pending: &[Outcome],
    of_kind: impl Fn(&Outcome) -> bool,
    lost: &[JobId],
    ended: impl Fn(JobId) -> Ended,
) {
    if shared.metrics.is_none() {
        return;
    }
    for outcome in pending.iter().filter(|o| of_kind(o)) {
        if let Some(metrics) = &outcome.state.metrics {
            let id = outcome.state.lease.job_id;
            let lost = matches!(outcome.kind, OutcomeKind::Lost) || lost.contains(&id);
            metrics.ended(if lost { Ended::LeaseLost } else { ended(id) });
        }
    }
}

fn note_lost(shared: &Shared, what: &str, lost: &[jobqueue_core::JobId]) {
    if lost.is_empty() {
        return;
    }
    Counters::add(&shared.counters.lost, lost.len());
    log::warn!(
        "{} {what}(s) not written: the jobs were recovered by another worker after their lease expired ({})",
        lost.len(),
        lost.iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>()
            .join(", ")
    );
}

// The statements a flush writes outcomes with: one per kind of outcome,
// in the order the completer runs them, each with what it makes of its
// jobs. A kind added to [`OutcomeKind`] gets a row here, or is counted
// before the statements (`Handled`, `Lost`: nothing to write).

/// What a statement made of the jobs it was given.
pub(crate) enum Written {
    /// Those it applied ended as `.1`; those it reports lost were not
    /// written (their lease was lost).
    Fenced(Fenced, Ended),
    /// Each job as the statement says it ended (`usual` for one it does
    /// not name); `lost` were not written.
    Reported {
        ended: Vec<(JobId, Ended)>,
        lost: Vec<JobId>,
        usual: Ended,
    },
}

/// One statement of a flush.
pub(crate) struct Write {
    /// What its outcomes are called when some are not written.
    pub(crate) what: &'static str,
    /// Whether it writes `outcome`.
    pub(crate) takes: fn(&Outcome) -> bool,
    /// Writes `outcomes` (all of them ones it takes), in one statement.
    pub(crate) run: fn(&Shared, &mut QueueSession, &[&Outcome]) -> jobqueue_core::Result<Written>,
}

/// The statements of a flush, in the order they run.
pub(crate) const WRITES: [Write; 8] = [
    Write {
        what: "completion",
        takes: is_complete,
        run: complete,
    },
    Write {
        what: "completion",
        takes: is_complete_with_result,
        run: complete_with_results,
    },
    Write {
        what: "completion",
        takes: is_step_complete,
        run: complete_steps,
    },
    Write {
        what: "failure",
        takes: is_fail,
        run: fail,
    },
    Write {
        what: "release",
        takes: is_release,
        run: release,
    },
    Write {
        what: "cancellation",
        takes: is_cancel,
        run: cancel,
    },
    Write {
        what: "snooze",
        takes: is_snooze,
        run: snooze,
    },
    Write {
        what: "set-aside",
        takes: is_park,
        run: park,
    },
];

fn is_complete(o: &Outcome) -> bool {
    matches!(o.kind, OutcomeKind::Complete) && !o.state.workflow && !has_result(o)
}

/// Whether the handler recorded a result (`JobContext::set_result`).
fn has_result(o: &Outcome) -> bool {
    crate::sync::lock(&o.state.result).is_some()
}

fn is_complete_with_result(o: &Outcome) -> bool {
    matches!(o.kind, OutcomeKind::Complete) && !o.state.workflow && has_result(o)
}

/// Completions whose results are kept for their enqueuers, in the same
/// statement.
fn complete_with_results(
    shared: &Shared,
    session: &mut QueueSession,
    outcomes: &[&Outcome],
) -> Result {
    let retention = &shared.config.retention;
    let done = session.complete_results_many(
        &done_with_results(outcomes),
        retention.deletes_completed(),
        retention.results,
    )?;
    Ok(Written::Fenced(done, Ended::Completed))
}

/// Each outcome's lease and recorded result.
fn done_with_results(outcomes: &[&Outcome]) -> Vec<StepDone> {
    outcomes
        .iter()
        .map(|o| StepDone {
            lease: o.lease(),
            result: crate::sync::lock(&o.state.result).clone(),
        })
        .collect()
}

fn complete(shared: &Shared, session: &mut QueueSession, outcomes: &[&Outcome]) -> Result {
    let leases: Vec<_> = outcomes.iter().map(|o| o.lease()).collect();
    let done = if shared.config.retention.deletes_completed() {
        session.complete_and_delete_many(&leases)?
    } else {
        session.complete_many(&leases)?
    };
    Ok(Written::Fenced(done, Ended::Completed))
}

fn is_step_complete(o: &Outcome) -> bool {
    matches!(o.kind, OutcomeKind::Complete) && o.state.workflow
}

fn complete_steps(shared: &Shared, session: &mut QueueSession, outcomes: &[&Outcome]) -> Result {
    let delete = shared.config.retention.deletes_completed();
    let done = session.complete_steps_many(&done_with_results(outcomes), delete)?;
    Ok(Written::Fenced(done, Ended::Completed))
}

fn is_fail(o: &Outcome) -> bool {
    matches!(o.kind, OutcomeKind::Fail { .. })
}

fn fail(shared: &Shared, session: &mut QueueSession, outcomes: &[&Outcome]) -> Result {
    let failures: Vec<Failure> = outcomes
        .iter()
        .filter_map(|o| match &o.kind {
            OutcomeKind::Fail { error, retry } => Some(match retry {
                Some(policy) => Failure::retry(o.lease(), error.clone(), policy),
                None => Failure::permanent(o.lease(), error.clone()),
            }),
            _ => None,
        })
        .collect();
    let done = match shared.registry.lifecycle_handlers() {
        [] => session.fail_many(&failures)?,
        handlers => crate::lifecycle::fail_many(session, &failures, handlers)?,
    };
    let ended = |outcome: &FailOutcome| match outcome {
        FailOutcome::Retrying { .. } => Ended::Retried,
        FailOutcome::Failed => Ended::Failed,
        FailOutcome::Cancelled => Ended::Cancelled,
    };
    Ok(Written::Reported {
        ended: each_ended(&done.outcomes, ended),
        lost: done.lost,
        usual: Ended::Failed,
    })
}

fn is_release(o: &Outcome) -> bool {
    matches!(o.kind, OutcomeKind::Release)
}

fn release(_: &Shared, session: &mut QueueSession, outcomes: &[&Outcome]) -> Result {
    let leases: Vec<_> = outcomes.iter().map(|o| o.lease()).collect();
    Ok(Written::Fenced(
        session.release_many(&leases)?,
        Ended::Released,
    ))
}

fn is_cancel(o: &Outcome) -> bool {
    matches!(o.kind, OutcomeKind::Cancelled)
}

fn cancel(shared: &Shared, session: &mut QueueSession, outcomes: &[&Outcome]) -> Result {
    let leases: Vec<_> = outcomes.iter().map(|o| o.lease()).collect();
    let done = match shared.registry.lifecycle_handlers() {
        [] => session.cancel_held_many(&leases)?,
        handlers => crate::lifecycle::cancel_held_many(session, &leases, handlers)?,
    };
    Ok(Written::Fenced(done, Ended::Cancelled))
}

fn is_snooze(o: &Outcome) -> bool {
    matches!(o.kind, OutcomeKind::Snooze(_) | OutcomeKind::RateLimited(_))
}

fn snooze(shared: &Shared, session: &mut QueueSession, outcomes: &[&Outcome]) -> Result {
    let snoozes: Vec<Snooze> = outcomes
        .iter()
        .filter_map(|o| {
            let (delay, queue_backoff) = match o.kind {
                OutcomeKind::Snooze(delay) => (delay, false),
                OutcomeKind::RateLimited(delay) => (delay, true),
                _ => return None,
            };
            Some(Snooze {
                lease: o.lease(),
                delay,
                queue_backoff,
            })
        })
        .collect();
    let done = session.snooze_many(&snoozes, shared.config.max_snoozes)?;
    let ended = |status: &JobStatus| match status {
        JobStatus::Failed => Ended::Failed,
        JobStatus::Cancelled => Ended::Cancelled,
        _ => Ended::Snoozed,
    };
    Ok(Written::Reported {
        ended: each_ended(&done.outcomes, ended),
        lost: done.lost,
        usual: Ended::Snoozed,
    })
}

fn is_park(o: &Outcome) -> bool {
    matches!(o.kind, OutcomeKind::Park)
}

fn park(shared: &Shared, session: &mut QueueSession, outcomes: &[&Outcome]) -> Result {
    let leases: Vec<_> = outcomes.iter().map(|o| o.lease()).collect();
    Ok(Written::Fenced(
        session.park_many(&leases, &shared.config.worker_id)?,
        Ended::Unhandled,
    ))
}

type Result = jobqueue_core::Result<Written>;

/// How each job of a statement's `outcomes` ended, as `ended` maps them.
fn each_ended<T>(outcomes: &[(JobId, T)], ended: impl Fn(&T) -> Ended) -> Vec<(JobId, Ended)> {
    outcomes
        .iter()
        .map(|(id, outcome)| (*id, ended(outcome)))
        .collect()
}

#[cfg(test)]
mod writes_tests {
    use super::*;

    /// Every kind of outcome is written by exactly one statement, or
    /// counted before them (handled by the handler, or lost).
    #[test]
    fn each_kind_of_outcome_has_one_statement() {
        use std::sync::Arc;
        use std::time::Duration;

        use jobqueue_core::engine::Lease;

        use crate::job_state::JobState;

        let kinds = || {
            [
                ("complete", OutcomeKind::Complete, 1),
                ("release", OutcomeKind::Release, 1),
                ("cancelled", OutcomeKind::Cancelled, 1),
                ("park", OutcomeKind::Park, 1),
                ("snooze", OutcomeKind::Snooze(Duration::ZERO), 1),
                ("rate limited", OutcomeKind::RateLimited(Duration::ZERO), 1),
                (
                    "fail",
                    OutcomeKind::Fail {
                        error: String::new(),
                        retry: None,
                    },
                    1,
                ),
                ("handled", OutcomeKind::Handled, 0),
                ("lost", OutcomeKind::Lost, 0),
            ]
        };
        for workflow in [false, true] {
            for (name, kind, statements) in kinds() {
                let lease = Lease {
                    job_id: JobId::new(),
                    token: 1,
                    attempt: 1,
                };
                let mut state = JobState::new(lease, "t".into(), None, false, 0);
                state.workflow = workflow;
                let outcome = Outcome {
                    state: Arc::new(state),
                    kind,
                };
                let taking = WRITES.iter().filter(|w| (w.takes)(&outcome)).count();
                assert_eq!(taking, statements, "{name} (workflow {workflow})");
            }
        }
    }
}
