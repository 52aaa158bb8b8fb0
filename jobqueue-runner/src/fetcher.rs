//! The fetcher: claims batches of jobs when workers have room, and sleeps
//! until woken (a notification, a finished job) or the poll interval passes.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, Sender, select};
use jobqueue_core::{Claim, JobRow};

use crate::db::Db;
use crate::shared::{Backoff, JobState, Shared};

/// First re-poll after a claim that found work.
const QUICK_REPOLL: Duration = Duration::from_millis(2);

/// Jobs to claim beyond what the workers can start at once: the configured
/// prefetch, raised (up to one batch) to what the workers finish during one
/// claim round trip. A job prefetched so would not start sooner on another
/// runner, since it starts before a new claim could return; for jobs that
/// take longer than a round trip, this stays at the configured prefetch.
fn prefetch(shared: &Shared, claim_micros: u64) -> usize {
    let config = &shared.config;
    let job_micros = shared.job_micros.load(Ordering::Relaxed);
    if job_micros == 0 || claim_micros == 0 {
        return config.prefetch;
    }
    let finished_per_claim = (config.concurrency as u64).saturating_mul(claim_micros) / job_micros;
    (finished_per_claim as usize).clamp(config.prefetch, config.batch_size.max(config.prefetch))
}

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
    // After finding work, re-poll at short, growing intervals before falling
    // back to the slow poll: jobs whose enqueue skipped its notification
    // (debounced) commit shortly after one that did.
    let mut repoll = config.poll_interval;
    // Moving average of a claim's round trip, in microseconds.
    let mut claim_micros = 0u64;
    let mut claim = Claim::new(config.worker_id.clone())
        .queues(config.queues.iter().cloned())
        .job_types(shared.job_types.iter().cloned())
        .lease(config.lease);
    loop {
        if shared.is_stopping() {
            break;
        }
        let capacity = config.concurrency + prefetch(&shared, claim_micros);
        // Claim in chunks: wait until at least this much room, unless idle.
        let chunk = (capacity.min(config.batch_size) / 2).max(1);
        let outstanding = shared.outstanding.load(Ordering::Acquire);
        let room = capacity.saturating_sub(outstanding).min(config.batch_size);
        if room == 0 || (room < chunk && outstanding > 0) {
            // Ask the workers for a wake-up once there is a chunk of room,
            // then look again in case it came about meanwhile.
            shared.wake_below.store(capacity - chunk, Ordering::Release);
            if shared.outstanding.load(Ordering::Acquire) > capacity - chunk
                && !wait(&wake, &stop, config.poll_interval)
            {
                break;
            }
            continue;
        }
        claim.limit = room as i64;
        let started = Instant::now();
        match db.run(&shared.health, |session| session.claim(&claim)) {
            Ok(rows) => {
                backoff.reset();
                let took = started.elapsed().as_micros().min(u128::from(u32::MAX)) as u64;
                claim_micros = if claim_micros == 0 {
                    took
                } else {
                    (claim_micros * 7 + took) / 8
                };
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
                if got < room {
                    // The queue ran dry: finishing jobs cannot bring more.
                    shared.wake_below.store(0, Ordering::Release);
                    if !wait(&wake, &stop, repoll.min(config.poll_interval)) {
                        break;
                    }
                }
            }
            Err(e) => {
                log::warn!("claim failed: {e}");
                if crate::shared::stopped_within(&stop, backoff.next_delay()) {
                    break;
                }
            }
        }
    }
    log::debug!("fetcher stopped");
}
