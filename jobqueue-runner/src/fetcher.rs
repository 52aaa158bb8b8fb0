//! The fetcher: claims batches of jobs when workers have room, and sleeps
//! until woken (a notification, a finished job) or the poll interval passes.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use crossbeam_channel::{Receiver, Sender, select};
use jobqueue_core::{Claim, JobRow};

use crate::db::Db;
use crate::shared::{Backoff, JobState, Shared};

/// First re-poll after a claim that found work.
const QUICK_REPOLL: Duration = Duration::from_millis(2);

/// A claimed job on its way to a worker.
pub(crate) struct Claimed {
    pub(crate) row: JobRow,
    pub(crate) state: Arc<JobState>,
}

/// Waits for a wake-up, a stop, or `timeout`. Returns false on stop.
fn wait(wake: &Receiver<()>, stop: &Receiver<()>, timeout: Duration) -> bool {
    let stopped = select! {
        recv(wake) -> _ => false,
        recv(stop) -> _ => true,
        default(timeout) => false,
    };
    !stopped
}

pub(crate) fn run(
    shared: Arc<Shared>,
    jobs: Sender<Claimed>,
    wake: Receiver<()>,
    stop: Receiver<()>,
) {
    let config = &shared.config;
    let mut db = Db::new(&config.database_url, "fetcher");
    let mut backoff = Backoff::new();
    let capacity = config.concurrency + config.prefetch;
    // Claim in chunks: wait until at least this much room, unless idle.
    let chunk = (capacity.min(config.batch_size) / 2).max(1);
    // After finding work, re-poll at short, growing intervals before falling
    // back to the slow poll: jobs whose enqueue skipped its notification
    // (debounced) commit shortly after one that did.
    let mut repoll = config.poll_interval;
    let mut claim = Claim::new(config.worker_id.clone())
        .queues(config.queues.iter().cloned())
        .job_types(shared.job_types.iter().cloned())
        .lease(config.lease);
    loop {
        if shared.is_stopping() {
            break;
        }
        let outstanding = shared.outstanding.load(Ordering::Acquire);
        let room = capacity.saturating_sub(outstanding).min(config.batch_size);
        if room == 0 || (room < chunk && outstanding > 0) {
            if !wait(&wake, &stop, config.poll_interval) {
                break;
            }
            continue;
        }
        claim.limit = room as i64;
        match db.run(&shared.health, |conn| jobqueue_core::claim(conn, &claim)) {
            Ok(rows) => {
                backoff.reset();
                let got = rows.len();
                shared.outstanding.fetch_add(got, Ordering::AcqRel);
                crate::shared::Counters::add(&shared.counters.claimed, got);
                for row in rows {
                    let state = Arc::new(JobState::new(row.lease(), row.job_type.clone()));
                    shared.inflight.insert(Arc::clone(&state));
                    if jobs.send(Claimed { row, state }).is_err() {
                        // Every worker is gone: the runner is going down. The
                        // leases of what is left expire and get recovered.
                        return;
                    }
                }
                repoll = if got > 0 {
                    QUICK_REPOLL
                } else {
                    (repoll * 2).min(config.poll_interval)
                };
                if got < room && !wait(&wake, &stop, repoll.min(config.poll_interval)) {
                    break;
                }
            }
            Err(e) => {
                log::debug!("claim failed: {e}");
                if crate::shared::stopped_within(&stop, backoff.next_delay()) {
                    break;
                }
            }
        }
    }
    log::debug!("fetcher stopped");
}
