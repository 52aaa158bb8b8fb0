//! Admitting keyed jobs that wait for their concurrency key's room, when
//! no completion or notification did.

use std::fmt;
use std::sync::Arc;
use std::time::{Duration, Instant};

use jobqueue_core::engine::QueueKey;

use super::context::ServiceContext;
use super::service::{Cadence, PassReport, Service};
use crate::RunnerConfig;

/// Waiting jobs looked at per statement.
const BATCH: i64 = 1000;

/// Pages of new waiting jobs a pass looks at, at most: the rest wait for
/// the next pass, so that the services after this one run meanwhile.
const NEW_PAGES: usize = 16;

/// Keys a pass of the sweep looks at, at most: a sweep of more keys goes
/// on in the passes after (every `poll_interval` while it is under way),
/// from where this one stopped.
const SWEEP_PAGE: i64 = 250;

/// Admits the waiting keyed jobs of the runner's queues whose key has
/// room: every `poll_interval` from the start, the jobs no admission looked
/// at yet (their notification was lost, or they came due since); every
/// `rescue_interval`, every key with waiting jobs, 250 keys per
/// statement, whatever announced their room or did not (a holder cancelled, deleted
/// or recovered as failed, a runner that died between a job's completion
/// and its key's admission, a raised limit). The statements wake the
/// queues that got due jobs. A pass sweeps at most 250 keys and the next
/// goes on from there, so a pass costs what it looks at, however many keys
/// wait; a sweep starts again `rescue_interval` after the last one reached
/// the last key.
#[derive(Debug)]
pub struct AdmitKeys {
    interval: Duration,
    sweep_every: Duration,
    swept_at: Option<Instant>,
    sweep_after: Option<QueueKey>,
}

impl AdmitKeys {
    /// The service as `config` paces it.
    pub fn new(config: &RunnerConfig) -> Self {
        AdmitKeys {
            interval: config.poll_interval,
            sweep_every: config.rescue_interval,
            swept_at: None,
            sweep_after: None,
        }
    }
}

/// What a pass of [`AdmitKeys`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct KeysAdmitted {
    /// Jobs admitted.
    pub jobs: i64,
    /// Keys the sweep looked at (0 when the pass did not sweep).
    pub keys_swept: usize,
}

impl fmt::Display for KeysAdmitted {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "admitted {} keyed jobs whose key had room (swept {} keys)",
            self.jobs, self.keys_swept
        )
    }
}

impl PassReport for KeysAdmitted {
    fn log_level(&self) -> Option<log::Level> {
        (self.jobs > 0).then_some(log::Level::Debug)
    }
}

impl Service for AdmitKeys {
    type Report = KeysAdmitted;

    fn cadence(&self) -> Cadence {
        Cadence::from_start("admitting keyed jobs", self.interval)
    }

    fn run_once(&mut self, cx: &mut ServiceContext) -> jobqueue_core::Result<KeysAdmitted> {
        let shared = Arc::clone(&cx.shared);
        let queues = &shared.config.queues;
        let mut jobs = 0;
        // Pages forward past the jobs of keys an open enqueue holds, which
        // stay new: a walk from the first would find them again at every
        // page for as long as that enqueue stays open.
        let mut after = None;
        for _ in 0..NEW_PAGES {
            if crate::backoff::is_stopped(cx.stop()) {
                return Ok(KeysAdmitted {
                    jobs,
                    keys_swept: 0,
                });
            }
            let page = cx.run(|session| session.admit_new(queues, after.as_ref(), BATCH))?;
            jobs += page.admitted;
            match page.next {
                Some(next) => after = Some(next),
                None => break,
            }
        }
        let mut keys_swept = 0;
        // A sweep under way goes on; a new one starts once the last ended
        // `sweep_every` ago.
        let sweeping = self.sweep_after.is_some()
            || self
                .swept_at
                .is_none_or(|at| at.elapsed() >= self.sweep_every);
        if sweeping && !crate::backoff::is_stopped(cx.stop()) {
            let after = self.sweep_after.take();
            let sweep = cx.run(|session| session.sweep_keys(queues, after.as_ref(), SWEEP_PAGE))?;
            jobs += sweep.admitted;
            keys_swept += sweep.keys;
            self.sweep_after = sweep.next;
            if self.sweep_after.is_none() {
                self.swept_at = Some(Instant::now());
            }
        }
        Ok(KeysAdmitted { jobs, keys_swept })
    }
}
