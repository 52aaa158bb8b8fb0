//! Handing back claimed jobs that wait for a worker while every worker is
//! busy with long jobs: the prefetch grew while jobs were short, and
//! another runner could start the waiting ones.

use std::sync::atomic::Ordering;
use std::time::Duration;

use crossbeam_channel::Sender;

use crate::RunnerConfig;
use crate::dispatch::{JobReceiver, JobSender};
use crate::messages::{Outcome, OutcomeKind};
use crate::shared::Shared;

/// What the fetcher needs to hand jobs back without a worker: claimed jobs
/// nobody is starting (released), and jobs of types this runner has no
/// handler for (set aside).
pub(crate) struct HandBack {
    /// The workers' queue, to take unstarted jobs back out of.
    pub(crate) queued: JobReceiver,
    /// Where handed-back jobs go (the completer writes them).
    pub(crate) outcomes: Sender<Outcome>,
}

/// How long the workers may start nothing while claimed jobs wait before the
/// waiting jobs beyond the configured prefetch are handed back.
const SHED_AFTER: Duration = Duration::from_millis(100);

/// How many waiting jobs to hand back: those beyond the configured prefetch,
/// once the workers have started nothing for [`SHED_AFTER`] (`idle_for`).
fn to_shed(config: &RunnerConfig, waiting: usize, idle_for: Duration) -> usize {
    if idle_for < SHED_AFTER {
        return 0;
    }
    waiting.saturating_sub(config.effective_prefetch())
}

/// Hands back claimed jobs beyond the configured prefetch when every worker
/// has been busy for `SHED_AFTER` since the last job start or `last_claim`
/// (in the runner's microseconds). They go back to pending without using
/// up an attempt.
pub(super) fn shed(shared: &Shared, jobs: &JobSender, shed: &HandBack, last_claim: u64) {
    let waiting = jobs.len();
    if waiting <= shared.config.effective_prefetch() {
        return;
    }
    let idle_for = shared
        .micros_now()
        .saturating_sub(shared.last_start.load(Ordering::Relaxed).max(last_claim));
    let excess = to_shed(&shared.config, waiting, Duration::from_micros(idle_for));
    if excess == 0 {
        return;
    }
    // Jobs run at least this long now: the prefetch drops at once.
    shared.job_micros.fetch_max(idle_for, Ordering::Relaxed);
    let mut released = 0;
    for _ in 0..excess {
        let Some(claimed) = shed.queued.try_recv() else {
            break;
        };
        let _ = shed
            .outcomes
            .send(Outcome::new(&claimed.state, OutcomeKind::Release));
        released += 1;
    }
    if released > 0 {
        log::info!("handed back {released} claimed jobs: every worker is busy with long jobs");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn waiting_jobs_beyond_the_prefetch_are_shed_once_workers_stall() {
        let config = RunnerConfig::new("postgres://x/y").concurrency(8);
        assert_eq!(to_shed(&config, 50, Duration::from_millis(20)), 0);
        assert_eq!(to_shed(&config, 50, SHED_AFTER), 48);
        assert_eq!(to_shed(&config, 2, Duration::from_secs(1)), 0);
    }
}
