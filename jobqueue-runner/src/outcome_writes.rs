//! The statements a flush writes outcomes with: one per kind of outcome,
//! in the order the completer runs them, each with what it makes of its
//! jobs. A kind added to [`OutcomeKind`] gets a row here, or is counted
//! before the statements (`Handled`, `Lost`: nothing to write).

use jobqueue_core::JobId;
use jobqueue_core::JobStatus;
use jobqueue_core::engine::{FailOutcome, Failure, Fenced, QueueSession, Snooze, StepDone};

use crate::messages::{Outcome, OutcomeKind};
use crate::metrics::Outcome as Ended;
use crate::shared::Shared;

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
mod tests {
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
