//! Index upkeep: rebuilding the indexes of live jobs that a held xmin
//! horizon left bloated.
//!
//! While something holds the horizon, every claimed job leaves its
//! `pending` entry in the claim index and nothing removes it; once the
//! horizon moves on, vacuum empties those pages but the index keeps its
//! size, its live entries spread thin over it, until a `REINDEX` (see
//! `jobqueue_core::engine::index_sizes` for how the packed size is estimated). So
//! every `index_upkeep_interval` the service compares each index of live
//! jobs (`jobqueue_core::engine::LIVE_JOB_INDEXES`: the claim's, then the held,
//! scheduled and set-aside jobs') with its packed size, and rebuilds, with
//! `REINDEX INDEX CONCURRENTLY` (claims, completions and enqueues go on),
//! one that is
//!
//! - at least [`IndexUpkeep::DEFAULT_FACTOR`] times its packed size, and at
//!   least [`IndexUpkeep::DEFAULT_MIN_BYTES`] on disk: below that a rebuild
//!   gains nothing worth its two scans of the table (under a steady load
//!   the claim index of an emptied queue stays well under a megabyte);
//! - while nothing pins the horizon: the reading
//!   (`jobqueue_core::engine::xmin_horizon`) is free, or its holder has held it for
//!   less than [`SHORT_PIN`] (a transaction under way; under load one
//!   always is). A rebuild waits for the transactions older than it, so
//!   under a pin it would wait it out; and a vacuum must have removed the
//!   dead entries before the planner's count tells the live ones.
//!
//! One runner at a time: the pass holds an advisory lock (others report
//! [`Kept::Busy`]). A rebuild runs outside any transaction, waits at most
//! 10 s for a lock and runs at most 30 minutes
//! (`jobqueue_core::engine::rebuild_index`); a runner told to stop cancels the one
//! under way. What an interrupted rebuild leaves (an invalid copy, which
//! every write still maintains) is dropped at the next pass, or right after
//! the failure. After a failed rebuild, the next pass waits twice as long
//! as the last, up to 64 intervals, so a table too large to rebuild in 30
//! minutes is not scanned every interval.

use std::fmt;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crossbeam_channel::Sender;
use jobqueue_core::engine::{IndexSize, LIVE_JOB_INDEXES, Pin};

use super::context::ServiceContext;
use super::service::{Cadence, PassReport, Service, jittered, size};
use crate::RunnerConfig;

/// A pin held for less than this is a transaction under way, not a pin.
pub const SHORT_PIN: Duration = Duration::from_secs(5);

/// The first PostgreSQL version with `REINDEX ... CONCURRENTLY`.
const CONCURRENT_REINDEX_SINCE: i32 = 120_000;

/// The most doublings of the interval after failed rebuilds.
const MOST_DOUBLINGS: u32 = 6;

/// Rebuilds the indexes of live jobs that a held horizon left several
/// times their packed size (see `index_upkeep.rs`), every
/// `index_upkeep_interval`.
#[derive(Debug)]
pub struct IndexUpkeep {
    interval: Duration,
    factor: f64,
    min_bytes: i64,
    /// Passes in a row whose rebuild failed.
    failures: u32,
}

impl IndexUpkeep {
    /// Rebuild at this many times the packed size.
    pub const DEFAULT_FACTOR: f64 = 4.0;

    /// Leave an index smaller than this as it is: 8 MiB.
    pub const DEFAULT_MIN_BYTES: i64 = 8 << 20;

    /// The service as `config` paces it, with the default thresholds.
    pub fn new(config: &RunnerConfig) -> Self {
        IndexUpkeep {
            interval: config.index_upkeep_interval,
            factor: Self::DEFAULT_FACTOR,
            min_bytes: Self::DEFAULT_MIN_BYTES,
            failures: 0,
        }
    }

    /// Leaves indexes smaller than `bytes` as they are (default
    /// [`IndexUpkeep::DEFAULT_MIN_BYTES`]).
    pub fn min_bytes(mut self, bytes: i64) -> Self {
        self.min_bytes = bytes;
        self
    }

    /// Why `index` needs no rebuild, whatever the horizon (`None`: it is
    /// bloated enough for one).
    fn fine(&self, index: &IndexSize) -> Option<Kept> {
        if !index.valid {
            return Some(Kept::Invalid);
        }
        let Some(bloat) = index.bloat() else {
            return Some(Kept::NotCounted);
        };
        if index.bytes < self.min_bytes {
            Some(Kept::Small {
                min_bytes: self.min_bytes,
            })
        } else if bloat < self.factor {
            Some(Kept::Packed {
                factor: self.factor,
            })
        } else {
            None
        }
    }
}

/// What a pass of [`IndexUpkeep`] did.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct IndexUpkeepReport {
    /// Each index of live jobs: its size, and what became of it.
    pub indexes: Vec<IndexUpkept>,
    /// What interrupted rebuilds had left behind, dropped.
    pub leftovers_dropped: Vec<String>,
}

impl IndexUpkeepReport {
    /// What became of index `name`, if it exists.
    pub fn index(&self, name: &str) -> Option<&IndexUpkept> {
        self.indexes
            .iter()
            .find(|upkept| upkept.before.name == name)
    }
}

/// One index's size and what a pass did with it.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct IndexUpkept {
    /// Its size (and estimated packed size) before.
    pub before: IndexSize,
    /// What became of it.
    pub upkeep: Upkeep,
}

/// What a pass did with an index.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum Upkeep {
    /// Rebuilt.
    Rebuilt {
        /// Its size on disk after, bytes.
        after_bytes: i64,
        /// How long the rebuild took.
        took: Duration,
    },
    /// Left as it is, and why.
    Kept(Kept),
    /// The rebuild failed (a lock or statement timeout, a cancel): the
    /// database's message.
    Failed(String),
}

/// Why an index was left as it is.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum Kept {
    /// Smaller than the service's floor.
    Small {
        /// The floor, bytes.
        min_bytes: i64,
    },
    /// Less than `factor` times its packed size.
    Packed {
        /// The factor.
        factor: f64,
    },
    /// Its entries were never counted (no vacuum, analyze or build since
    /// it was created empty): no packed size to compare with.
    NotCounted,
    /// It is invalid (an interrupted build): the doctor's `fetch index`
    /// check says what to do.
    Invalid,
    /// Bloated, but the xmin horizon is pinned: a rebuild would wait the
    /// pin out, and the dead entries cannot go before it ends.
    Pinned(Pin),
    /// Bloated, but another runner holds the upkeep's lock.
    Busy,
    /// Bloated, but the server predates `REINDEX CONCURRENTLY`.
    OldServer {
        /// Its `server_version_num`.
        version: i32,
    },
    /// Bloated, but an earlier rebuild of this pass failed.
    AfterFailure,
}

impl fmt::Display for Kept {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Kept::Small { min_bytes } => write!(f, "under {}", size(*min_bytes)),
            Kept::Packed { factor } => write!(f, "under {factor}x its packed size"),
            Kept::NotCounted => f.write_str("its entries were never counted"),
            Kept::Invalid => f.write_str("it is invalid"),
            Kept::Pinned(pin) => write!(f, "the xmin horizon is pinned by {pin}"),
            Kept::Busy => f.write_str("another runner keeps the indexes up"),
            Kept::OldServer { version } => write!(
                f,
                "server version {version} has no REINDEX CONCURRENTLY (PostgreSQL 12+)"
            ),
            Kept::AfterFailure => f.write_str("a rebuild failed before it"),
        }
    }
}

impl fmt::Display for IndexUpkept {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let before = &self.before;
        write!(f, "{} {}", before.name, size(before.bytes))?;
        if let (Some(packed), Some(bloat)) = (before.packed_bytes, before.bloat()) {
            write!(f, " (packed ~{}, {bloat:.1}x)", size(packed))?;
        }
        match &self.upkeep {
            Upkeep::Rebuilt { after_bytes, took } => write!(
                f,
                ": rebuilt, now {} ({:.1} s)",
                size(*after_bytes),
                took.as_secs_f64()
            ),
            Upkeep::Kept(why) => write!(f, ": kept, {why}"),
            Upkeep::Failed(e) => write!(f, ": rebuild failed: {e}"),
        }
    }
}

impl fmt::Display for IndexUpkeepReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("index upkeep: ")?;
        let lines: Vec<String> = self.indexes.iter().map(ToString::to_string).collect();
        f.write_str(&lines.join("; "))?;
        if !self.leftovers_dropped.is_empty() {
            write!(
                f,
                "; dropped what interrupted rebuilds left: {}",
                self.leftovers_dropped.join(", ")
            )?;
        }
        Ok(())
    }
}

impl PassReport for IndexUpkeepReport {
    fn log_level(&self) -> Option<log::Level> {
        let upkeeps = || self.indexes.iter().map(|upkept| &upkept.upkeep);
        if upkeeps().any(|u| matches!(u, Upkeep::Failed(_))) {
            Some(log::Level::Warn)
        } else if upkeeps().any(|u| matches!(u, Upkeep::Rebuilt { .. }))
            || !self.leftovers_dropped.is_empty()
        {
            Some(log::Level::Info)
        } else {
            Some(log::Level::Debug)
        }
    }
}

impl Service for IndexUpkeep {
    type Report = IndexUpkeepReport;

    fn cadence(&self) -> Cadence {
        Cadence::every("index upkeep", self.interval)
    }

    fn run_once(&mut self, cx: &mut ServiceContext) -> jobqueue_core::Result<IndexUpkeepReport> {
        let sizes = cx.run(|s| jobqueue_core::engine::index_sizes(s.conn(), &LIVE_JOB_INDEXES))?;
        // Those bloated enough for a rebuild read `Busy` until the lock is
        // this runner's, then whatever became of them.
        let mut indexes: Vec<IndexUpkept> = sizes
            .into_iter()
            .map(|before| IndexUpkept {
                upkeep: Upkeep::Kept(self.fine(&before).unwrap_or(Kept::Busy)),
                before,
            })
            .collect();
        let mut report = IndexUpkeepReport {
            indexes: Vec::new(),
            leftovers_dropped: Vec::new(),
        };
        if !cx.run(|s| jobqueue_core::engine::try_lock_index_upkeep(s.conn()))? {
            report.indexes = indexes;
            return Ok(report);
        }
        let upkept = self.upkeep(cx, &mut indexes, &mut report.leftovers_dropped);
        let unlocked = cx.run(|s| jobqueue_core::engine::unlock_index_upkeep(s.conn()));
        upkept?;
        unlocked?;
        report.indexes = indexes;
        Ok(report)
    }

    fn next_after(&self, _: &IndexUpkeepReport) -> Duration {
        jittered(self.interval * 2u32.pow(self.failures.min(MOST_DOUBLINGS)))
    }
}

impl IndexUpkeep {
    /// Under the upkeep's lock: drops leftovers, then rebuilds each of
    /// `indexes` that is bloated (marked [`Kept::Busy`] so far) if the
    /// server and the horizon allow, noting what became of it.
    fn upkeep(
        &mut self,
        cx: &mut ServiceContext,
        indexes: &mut [IndexUpkept],
        dropped: &mut Vec<String>,
    ) -> jobqueue_core::Result<()> {
        dropped
            .extend(cx.run_unbounded(|s| jobqueue_core::engine::drop_rebuild_leftovers(s.conn()))?);
        let bloated = |upkept: &IndexUpkept| upkept.upkeep == Upkeep::Kept(Kept::Busy);
        if !indexes.iter().any(bloated) {
            return Ok(());
        }
        let version = cx.run(|s| jobqueue_core::engine::server_version(s.conn()))?;
        let reader = Arc::clone(&cx.shared);
        let horizon = cx.run(|s| reader.horizon.read(s, Duration::ZERO))?;
        let mut failed = false;
        for upkept in indexes.iter_mut().filter(|upkept| bloated(upkept)) {
            upkept.upkeep = if version < CONCURRENT_REINDEX_SINCE {
                Upkeep::Kept(Kept::OldServer { version })
            } else if let Some(pin) = horizon.pin().filter(|_| horizon.pinned_for(SHORT_PIN)) {
                Upkeep::Kept(Kept::Pinned(pin.clone()))
            } else if failed {
                Upkeep::Kept(Kept::AfterFailure)
            } else {
                let upkeep = rebuild(cx, &upkept.before)?;
                if matches!(upkeep, Upkeep::Failed(_)) {
                    failed = true;
                    dropped.extend(cx.run_unbounded(|s| {
                        jobqueue_core::engine::drop_rebuild_leftovers(s.conn())
                    })?);
                }
                upkeep
            };
        }
        self.failures = if failed { self.failures + 1 } else { 0 };
        Ok(())
    }
}

/// Rebuilds `index`, cancelled if the runner is told to stop meanwhile;
/// an error of the rebuild itself is its [`Upkeep::Failed`], one of the
/// connection ends the pass.
fn rebuild(cx: &mut ServiceContext, index: &IndexSize) -> jobqueue_core::Result<Upkeep> {
    let pid = cx.run(|s| jobqueue_core::engine::backend_pid(s.conn()))?;
    let started = Instant::now();
    let rebuilt = {
        let _cancel = CancelOnStop::arm(cx, pid);
        cx.run_unbounded(|s| jobqueue_core::engine::rebuild_index(s.conn(), index))
    };
    let took = started.elapsed();
    if let Err(e) = rebuilt {
        return Ok(Upkeep::Failed(crate::health::one_line(&e)));
    }
    let after = cx.run(|s| jobqueue_core::engine::index_sizes(s.conn(), &[index.name.as_str()]))?;
    Ok(Upkeep::Rebuilt {
        after_bytes: after.first().map_or(0, |size| size.bytes),
        took,
    })
}

/// While armed, cancels the statement of server process `pid` (the
/// maintenance connection's rebuild) if the runner is told to stop: a
/// thread waiting on the stop signal, which asks the server on a
/// connection of its own.
struct CancelOnStop {
    /// Dropped when disarmed: ends the thread.
    disarm: Option<Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl CancelOnStop {
    fn arm(cx: &ServiceContext, pid: i32) -> Self {
        let (disarm, disarmed) = crossbeam_channel::bounded::<()>(0);
        let stop = cx.stop().clone();
        let connector = Arc::clone(&cx.shared.connector);
        let thread = std::thread::Builder::new()
            .name("jobqueue-rebuild-cancel".to_owned())
            .spawn(move || {
                crossbeam_channel::select! {
                    recv(disarmed) -> _ => {}
                    recv(stop) -> _ => {
                        let cancelled = connector
                            .service_connection("index upkeep's cancel")
                            .and_then(|mut conn| jobqueue_core::engine::cancel_backend(&mut conn, pid));
                        match cancelled {
                            Ok(_) => log::info!("stopping: cancelled the index rebuild under way"),
                            Err(e) => log::debug!("cancelling the index rebuild failed: {e}"),
                        }
                    }
                }
            });
        match thread {
            Ok(thread) => CancelOnStop {
                disarm: Some(disarm),
                thread: Some(thread),
            },
            Err(e) => {
                log::debug!("cannot start the thread that cancels a rebuild at stop: {e}");
                CancelOnStop {
                    disarm: None,
                    thread: None,
                }
            }
        }
    }
}

impl Drop for CancelOnStop {
    fn drop(&mut self) {
        drop(self.disarm.take());
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}
