//! Keyed jobs waiting for their concurrency key's room (their queue has a
//! key limit). The fetcher claims those it may straight from their keys'
//! lines, one write per job (`engine::claim_waiting`), before each claim
//! of pending jobs: at once when notifications announced waiting jobs,
//! while the last such claim took all it asked for, and at least every
//! poll interval (jobs that came due). Waiting jobs it would not claim so
//! (other job types, queues it caps, ordered keys, queues other limits
//! hold) are admitted to `pending` when announced, and by the
//! maintenance's admission pass otherwise.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use jobqueue_core::engine::Claim;

use super::Claimer;
use super::deliver::Delivery;
use crate::db::Db;
use crate::dispatch::Disconnected;
use crate::shared::Shared;

/// Waiting jobs one admission looks at; more are looked at by the next.
const ADMIT_BATCH: i64 = 1000;

/// Whether notifications announced waiting jobs since the fetcher last
/// looked.
#[derive(Debug, Default)]
pub(super) struct Announced(AtomicBool);

impl Announced {
    pub(super) fn set(&self) {
        self.0.store(true, Ordering::Release);
    }

    fn take(&self) -> bool {
        self.0.swap(false, Ordering::AcqRel)
    }
}

/// The fetcher's claims of waiting jobs.
pub(super) struct Lines {
    /// The claim: the runner's queues (all of them, whatever the claims of
    /// pending jobs aim at), types, worker and lease.
    claim: Claim,
    /// Notifications announced waiting jobs since the last claim of them.
    announced: bool,
    /// The last claim of waiting jobs took all it asked for: more may wait.
    more: bool,
    /// When the fetcher last claimed waiting jobs.
    looked_at: Option<Instant>,
    /// The last claim of pending jobs found some: waiting and pending jobs
    /// then share the room half and half.
    pending_found: bool,
}

impl Lines {
    /// Claims as `claim` (the fetcher's, before it aims at queues), and
    /// looks for waiting jobs at the first claim (they may have waited for
    /// a runner).
    pub(super) fn new(claim: Claim) -> Self {
        Lines {
            claim,
            announced: false,
            more: true,
            looked_at: None,
            pending_found: false,
        }
    }

    /// If waiting jobs were announced, admits those that this fetcher
    /// would not take straight from their lines, whose key has room
    /// (the statement wakes the queues that got due jobs), and marks the
    /// others of them as looked at; the next claim of waiting jobs looks
    /// for the rest. A full batch leaves the announcement up for the next
    /// round; a failure leaves the jobs to the maintenance's admission
    /// pass.
    pub(super) fn admit_announced(&mut self, shared: &Shared, claimer: &Claimer, db: &mut Db) {
        if !claimer.waiting.take() {
            return;
        }
        self.announced = true;
        match db.run(&shared.health, |session| {
            session.admit_new_unclaimable(&self.claim, ADMIT_BATCH)
        }) {
            Ok((_, looked)) if looked as i64 >= ADMIT_BATCH => claimer.waiting.set(),
            Ok(_) => {}
            Err(e) => log::debug!("admitting waiting keyed jobs failed: {e}"),
        }
    }

    /// Whether the last claim of waiting jobs took all it asked for.
    pub(super) fn more(&self) -> bool {
        self.more
    }

    /// Notes what the claim of pending jobs after this one found.
    pub(super) fn pending_found(&mut self, got: usize) {
        self.pending_found = got > 0;
    }

    /// Claims, when it is time to look (see the module's text), up to
    /// `room` waiting jobs (half of it while pending jobs were found too),
    /// leaving out the queues `pending` (the claim of pending jobs about to
    /// run) caps, and hands them to the workers; returns how many. A
    /// failure is logged and claims nothing.
    pub(super) fn claim(
        &mut self,
        shared: &Shared,
        claimer: &Claimer,
        db: &mut Db,
        delivery: &mut Delivery,
        pending: &Claim,
        room: usize,
    ) -> Result<usize, Disconnected> {
        let poll = shared.config.poll_interval;
        let due =
            self.announced || self.more || self.looked_at.is_none_or(|at| at.elapsed() >= poll);
        if room == 0 || !due {
            return Ok(0);
        }
        let ask = if self.pending_found {
            room.div_ceil(2)
        } else {
            room
        };
        let claim = &mut self.claim;
        claim.limit = ask as i64;
        claim.queue_limits.clone_from(&pending.queue_limits);
        self.announced = false;
        let started = Instant::now();
        self.looked_at = Some(started);
        match db.run(&shared.health, |session| session.claim_waiting(claim)) {
            Ok(rows) => {
                let got = rows.len();
                self.more = got >= ask;
                if got > 0 {
                    delivery.deliver(shared, claimer, rows, started.elapsed())?;
                }
                Ok(got)
            }
            Err(e) => {
                self.more = false;
                if !db.lost_connection() {
                    log::warn!(
                        "claiming waiting keyed jobs failed: {}",
                        crate::health::one_line(&e)
                    );
                }
                Ok(0)
            }
        }
    }
}
