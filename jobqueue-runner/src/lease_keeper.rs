//! The lease keeper: renews the leases of in-flight jobs in one statement per
//! beat, on a connection of its own (so a pool drained by slow handlers never
//! lets a live lease expire), writing in the same statement the progress
//! their handlers noted since the last beat; passes cancel requests and lost
//! leases to the handlers; flags timeouts and abandons handlers that overrun
//! them.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Instant;

use crossbeam_channel::Receiver;
use jobqueue_core::engine::{Beat, Lease};

use crate::backoff::stopped_within;
use crate::claimer::Claimer;
use crate::db::Db;
use crate::job_state::{JobState, put_back_progress};
use crate::shared::Shared;

pub(crate) fn run(
    shared: Arc<Shared>,
    claimer: &Claimer,
    stop: Receiver<()>,
    spawn_worker: impl Fn(),
) {
    let config = &shared.config;
    let mut db = Db::new(&shared, "lease keeper");
    let mut registered = false;
    loop {
        registered = presence(&shared, &mut db, registered);
        if stopped_within(&stop, config.effective_heartbeat_interval()) {
            break;
        }
        let jobs = shared.inflight.snapshot();
        if jobs.is_empty() {
            continue;
        }
        let now = Instant::now();
        for job in &jobs {
            check_timeout(&shared, claimer, job, now, &spawn_worker);
        }
        let live: Vec<Arc<JobState>> = jobs
            .into_iter()
            .filter(|job| !job.abandoned.load(Ordering::Acquire))
            .collect();
        // Each beat carries the progress its handler reported since the
        // last one; a failed beat gives it back for the next.
        let beats: Vec<Beat> = live
            .iter()
            .map(|job| Beat {
                lease: job.lease,
                progress: job.progress.take(),
                events_base: Some(job.events_base),
            })
            .collect();
        let beat = db.run(&shared.health, |session| {
            session.heartbeat_with_progress(&beats, config.lease)
        });
        let Ok(beat) = beat else {
            put_back_progress(live.iter().map(|job| &**job), beats);
            continue;
        };
        for (job, sent) in live.iter().zip(&beats) {
            if sent.progress.is_some() {
                job.progress.written();
            }
            if beat.cancel_requested.contains(&job.lease.job_id) {
                job.cancel.store(true, Ordering::Relaxed);
                job.wake_handler();
            }
            if beat.lost.contains(&job.lease.job_id) {
                job.lost.store(true, Ordering::Relaxed);
                job.wake_handler();
            } else if sent.progress.is_some() {
                // The beat marked it `running` with its progress.
                job.marked_running.store(true, Ordering::Relaxed);
            }
        }
        // Jobs whose handlers have been running since the last beat show as
        // `running` (short jobs finish first and are never written twice).
        let started: Vec<&Arc<JobState>> = live
            .iter()
            .filter(|job| job.started().is_some() && !job.marked_running.load(Ordering::Relaxed))
            .collect();
        if !started.is_empty() {
            let leases: Vec<Lease> = started.iter().map(|job| job.lease).collect();
            if db
                .run(&shared.health, |conn| conn.start_many(&leases))
                .is_ok()
            {
                for job in started {
                    job.marked_running.store(true, Ordering::Relaxed);
                }
            }
        }
    }
    // The runner is stopping for good: it leaves the registry.
    let worker_id = &config.worker_id;
    if registered
        && let Err(e) = db.run(&shared.health, |session| {
            jobqueue_core::engine::deregister_runner(session.conn(), worker_id)
        })
    {
        log::debug!("leaving the runner registry failed: {e}");
    }
    log::debug!("lease keeper stopped");
}

/// Keeps this runner's row in `jobqueue_runners` fresh: registers it (at
/// start, or when its row is gone), else notes it alive. Returns whether it
/// is registered.
fn presence(shared: &Shared, db: &mut Db, registered: bool) -> bool {
    let config = &shared.config;
    if registered {
        let (since_pass, in_pass) = shared.maintenance.read();
        let maintenance = jobqueue_core::engine::MaintenanceBeat {
            since_pass,
            in_pass,
        };
        match db.run(&shared.health, |session| {
            jobqueue_core::engine::runner_seen(session.conn(), &config.worker_id, &maintenance)
        }) {
            Ok(true) => return true,
            Ok(false) => {}
            Err(e) => {
                log::debug!("refreshing the runner registry failed: {e}");
                return true;
            }
        }
    }
    let info = jobqueue_core::engine::RunnerInfo {
        worker_id: config.worker_id.clone(),
        host: crate::config::hostname(),
        pid: std::process::id(),
        version: crate::VERSION.to_owned(),
        queues: config.queues.clone(),
        job_types: shared.job_types.clone(),
        concurrency: config.concurrency,
        lease: config.lease,
    };
    match db.run(&shared.health, |session| {
        jobqueue_core::engine::register_runner(session.conn(), &info)
    }) {
        Ok(()) => true,
        Err(e) => {
            log::debug!("joining the runner registry failed: {e}");
            false
        }
    }
}

/// Flags a handler past its timeout; once it is a whole lease past it, stops
/// renewing its lease (another runner recovers the job) and replaces its
/// worker thread, so a handler that never returns costs one thread, not a slot.
fn check_timeout(
    shared: &Shared,
    claimer: &Claimer,
    job: &JobState,
    now: Instant,
    spawn_worker: &impl Fn(),
) {
    let Some(deadline) = job.deadline() else {
        return;
    };
    if now < deadline {
        return;
    }
    if !job.timed_out.swap(true, Ordering::AcqRel) {
        log::warn!(
            "job {} ({}) ran past its timeout",
            job.lease.job_id,
            job.job_type
        );
        crate::lifecycle::call_timed_out(
            shared.registry.lifecycle_handlers(),
            job.lease.job_id,
            &job.job_type,
        );
    }
    if now >= deadline + shared.config.lease && !job.abandoned.swap(true, Ordering::AcqRel) {
        log::error!(
            "job {} ({}) is still running a lease past its timeout: its lease is no longer renewed \
             and its worker thread is replaced",
            job.lease.job_id,
            job.job_type
        );
        shared
            .counters
            .abandoned_running
            .fetch_add(1, Ordering::AcqRel);
        claimer.finished(&shared.inflight, job);
        spawn_worker();
    }
}
