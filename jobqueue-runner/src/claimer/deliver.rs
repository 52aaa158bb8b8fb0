//! The hand-off: claimed jobs counted against the runner's room and
//! queued for the workers, and jobs of types without a handler set aside.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crossbeam_channel::Sender;
use jobqueue_core::engine::QueueKey;
use jobqueue_core::{JobRow, JobStatus};

use super::Claimer;
use crate::dispatch::{Disconnected, JobSender};
use crate::job_state::JobState;
use crate::messages::{Claimed, Outcome, OutcomeKind};
use crate::metrics::Outcome as Ended;
use crate::shared::Shared;

/// One claim thread's way to the workers and the completer, and the job
/// types it has set aside (each logged once).
pub(super) struct Delivery {
    jobs: JobSender,
    outcomes: Sender<Outcome>,
    unhandled_types: HashSet<String>,
    /// Claims of the early reserve (see `RunnerConfig::early_reserve`).
    early: bool,
}

impl Delivery {
    pub(super) fn new(jobs: JobSender, outcomes: Sender<Outcome>, early: bool) -> Self {
        Delivery {
            jobs,
            outcomes,
            unhandled_types: HashSet::new(),
            early,
        }
    }

    /// Hands claimed `rows` to the workers. Rows the claim set aside
    /// itself (types without a handler here: see `Claim::handled_types`)
    /// are counted, logged once per type, and noted for the set-aside
    /// service, which sets aside the rest of their queue's backlog of that
    /// type. `took`: the claim's round trip; `sent`, when it was sent, from
    /// which the jobs of the rate-limited queues in `margins` must start
    /// within their queue's margin.
    pub(super) fn deliver(
        &mut self,
        shared: &Shared,
        claimer: &Claimer,
        mut rows: Vec<JobRow>,
        took: Duration,
        sent: Instant,
        margins: &[(String, Duration)],
    ) -> Result<(), Disconnected> {
        if let Some(metrics) = &shared.metrics {
            metrics.claimed(took, rows.len());
        }
        rows.retain(|row| {
            let set_aside = row.status != JobStatus::Claimed;
            if set_aside {
                self.set_aside(shared, claimer, row);
            }
            !set_aside
        });
        let got = rows.len();
        claimer.room.took(got, self.early);
        crate::counters::Counters::add(&shared.counters.claimed, got);
        if got == 0 {
            crate::counters::Counters::add(&shared.counters.empty_claims, 1);
        }
        for row in rows {
            let queue_slot = claimer.room.take_queue_slot(&row.queue);
            let mut state = JobState::new(
                row.lease(),
                row.job_type.clone(),
                queue_slot,
                self.early,
                row.events_count,
            );
            state.key = row.concurrency_key.clone().map(|key| QueueKey {
                queue: row.queue.clone(),
                key,
            });
            state.workflow = row.workflow_id.is_some();
            state.start_by = margins
                .iter()
                .find(|(queue, _)| *queue == row.queue)
                .map(|(_, margin)| sent + *margin);
            if let Some(metrics) = &shared.metrics {
                let job = metrics.job(&row.queue, &row.job_type);
                job.claimed();
                state.metrics = Some(job);
                state.waited_at_claim = row
                    .claimed_at
                    .and_then(|claimed| (claimed - row.run_at).to_std().ok())
                    .unwrap_or_default();
            }
            let state = Arc::new(state);
            shared.inflight.insert(Arc::clone(&state));
            if shared.registry.get(&row.job_type).is_none() {
                // Only a runner with no handlers at all claims without handled
                // types (an empty list takes every type): set aside here.
                let _ = self.outcomes.send(Outcome::new(&state, OutcomeKind::Park));
                continue;
            }
            self.jobs.send(Claimed { row, state })?;
        }
        Ok(())
    }

    /// A job the claim set aside (or cancelled: its cancellation was asked
    /// for) because no handler here takes its type.
    fn set_aside(&mut self, shared: &Shared, claimer: &Claimer, row: &JobRow) {
        let (counter, outcome) = match row.status {
            JobStatus::Cancelled => (&shared.counters.cancelled, Ended::Cancelled),
            _ => (&shared.counters.unhandled, Ended::Unhandled),
        };
        crate::counters::Counters::add(counter, 1);
        if let Some(metrics) = &shared.metrics {
            metrics.job(&row.queue, &row.job_type).ended(outcome);
        }
        claimer.met_unhandled(&row.queue, &row.job_type);
        if self.unhandled_types.insert(row.job_type.clone()) {
            log::warn!(
                "no handler for job type `{}` (queue `{}`): its jobs are set aside \
                 as unhandled until a runner that handles it starts; register \
                 it here, or give it a queue of its own",
                row.job_type,
                row.queue
            );
        }
    }
}
