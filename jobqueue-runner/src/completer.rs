//! The completer: writes outcomes in batches — one statement per kind per
//! flush — and retries a flush until the database takes it. A job's slot in
//! the runner is free only once its outcome is written: a slow database
//! makes the runner claim less, never more.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, select};
use jobqueue_core::JobId;
use jobqueue_core::engine::{Beat, Progress, QueueKey};

use crate::backoff::Backoff;
use crate::claimer::Claimer;
use crate::counters::Counters;
use crate::db::Db;
use crate::job_state::put_back_progress;
use crate::messages::{Outcome, OutcomeKind};
use crate::metrics::Outcome as Ended;
use crate::outcome_writes::{WRITES, Write, Written};
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
