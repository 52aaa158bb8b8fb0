//! Setting aside a queue's backlog of a job type this runner has no handler
//! for, once its claims met some.

use std::collections::BTreeSet;
use std::fmt;
use std::time::Duration;

use jobqueue_core::engine::Resume;

use super::context::ServiceContext;
use super::service::{Cadence, PassReport, Service};
use crate::RunnerConfig;

/// Jobs set aside per pass: a pass is one statement of this many writes,
/// short enough to leave the other services their turn.
const BATCH: i64 = jobqueue_core::engine::DEFAULT_PROMOTE_BATCH;

/// Sets aside, a batch per pass, the due jobs of each queue and type the
/// runner's claims met without a handler for them. A claim sets aside the
/// jobs of such a type that it meets, but a backlog of them ahead of the
/// jobs the runner handles would take a claim per batch to get through;
/// this walks it once, in claim order, and passes back to back until it is
/// done. Between backlogs it looks every `poll_interval` whether claims
/// met another.
#[derive(Debug)]
pub struct SetAsideBacklogs {
    interval: Duration,
    /// Queues and types to walk, besides the one under way.
    waiting: BTreeSet<(String, String)>,
    /// The queue and type being walked, and where the next pass goes on.
    walking: Option<(String, String, Option<Resume>)>,
}

impl SetAsideBacklogs {
    /// The service as `config` paces it, with nothing to walk yet.
    pub fn new(config: &RunnerConfig) -> Self {
        SetAsideBacklogs {
            interval: config.poll_interval,
            waiting: BTreeSet::new(),
            walking: None,
        }
    }

    /// Walks the backlog of `job_type` in `queue` (a runner's claims ask
    /// for this themselves when they meet such jobs).
    pub fn walk(&mut self, queue: impl Into<String>, job_type: impl Into<String>) {
        let target = (queue.into(), job_type.into());
        let under_way = self
            .walking
            .as_ref()
            .is_some_and(|(q, t, _)| *q == target.0 && *t == target.1);
        if !under_way {
            self.waiting.insert(target);
        }
    }
}

/// What a pass of [`SetAsideBacklogs`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SetAsideReport {
    /// No backlog to walk.
    Idle,
    /// Set aside `jobs` due jobs of `job_type` in `queue`; `done`: the
    /// walk of that backlog reached its end.
    Walked {
        /// The queue.
        queue: String,
        /// The job type.
        job_type: String,
        /// Jobs set aside by this pass.
        jobs: i64,
        /// Whether the backlog's walk is over.
        done: bool,
    },
}

impl fmt::Display for SetAsideReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SetAsideReport::Idle => write!(f, "no backlog of an unhandled type to set aside"),
            SetAsideReport::Walked {
                queue,
                job_type,
                jobs,
                done,
            } => write!(
                f,
                "set aside {jobs} due jobs of type `{job_type}` in queue `{queue}`: no handler \
                 here{}",
                if *done { "; that backlog is done" } else { "" }
            ),
        }
    }
}

impl PassReport for SetAsideReport {
    fn log_level(&self) -> Option<log::Level> {
        match self {
            SetAsideReport::Walked { jobs, .. } if *jobs > 0 => Some(log::Level::Debug),
            _ => None,
        }
    }
}

impl Service for SetAsideBacklogs {
    type Report = SetAsideReport;

    fn cadence(&self) -> Cadence {
        Cadence::every("setting aside backlogs of unhandled types", self.interval)
    }

    fn run_once(&mut self, cx: &mut ServiceContext) -> jobqueue_core::Result<SetAsideReport> {
        if let Some(claimer) = &cx.claimer {
            for (queue, job_type) in claimer.take_unhandled_met() {
                self.walk(queue, job_type);
            }
        }
        if self.walking.is_none() {
            self.walking = self.waiting.pop_first().map(|(q, t)| (q, t, None));
        }
        let Some((queue, job_type, after)) = self.walking.take() else {
            return Ok(SetAsideReport::Idle);
        };
        let runner = cx.shared.config.worker_id.clone();
        let pass = cx.run(|session| {
            session.set_aside_due((&queue, &job_type), after.as_ref(), BATCH, &runner)
        });
        let pass = match pass {
            Ok(pass) => pass,
            Err(e) => {
                // Walked again from where it was, next time.
                self.walking = Some((queue, job_type, after));
                return Err(e);
            }
        };
        let done = pass.jobs < BATCH;
        if !done {
            self.walking = Some((queue.clone(), job_type.clone(), pass.next));
        }
        Ok(SetAsideReport::Walked {
            queue,
            job_type,
            jobs: pass.jobs,
            done,
        })
    }

    fn next_after(&self, _report: &SetAsideReport) -> Duration {
        if self.walking.is_some() || !self.waiting.is_empty() {
            Duration::ZERO
        } else {
            self.interval
        }
    }
}
