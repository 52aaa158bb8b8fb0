//! The bench's job type: does nothing, optionally notes when it started.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Instant;

use jobqueue_core::Job;
use serde::{Deserialize, Serialize};

use crate::lock;
use jobqueue_runner::{JobContext, JobError, Perform, Registry};

/// Handler start times by `seq`, while a latency measurement is recording.
static STARTS: Mutex<Option<HashMap<u64, Instant>>> = Mutex::new(None);

/// A no-op job; `seq` identifies it to latency measurements.
#[derive(Debug, Serialize, Deserialize, Job)]
#[job(type = "bench.noop")]
pub struct BenchNoop {
    /// Sequence number (0: not timed).
    pub seq: u64,
}

impl Perform for BenchNoop {
    fn perform(&self, _ctx: &mut JobContext<'_>) -> Result<(), JobError> {
        if self.seq > 0 {
            let now = Instant::now();
            if let Some(starts) = lock(&STARTS).as_mut() {
                starts.insert(self.seq, now);
            }
        }
        Ok(())
    }
}

/// A job that works for `micros` microseconds (sleeping, as a job waiting
/// on a remote call does); `seq` identifies it as [`BenchNoop`]'s does.
#[derive(Debug, Serialize, Deserialize, Job)]
#[job(type = "bench.work")]
pub struct BenchWork {
    /// Sequence number (0: not timed).
    pub seq: u64,
    /// How long it works.
    pub micros: u64,
}

impl Perform for BenchWork {
    fn perform(&self, ctx: &mut JobContext<'_>) -> Result<(), JobError> {
        BenchNoop { seq: self.seq }.perform(ctx)?;
        std::thread::sleep(std::time::Duration::from_micros(self.micros));
        Ok(())
    }
}

/// A job that does nothing with a payload of some size (the size of a
/// typical job's arguments): what the WAL per job pays for the payload.
#[derive(Debug, Serialize, Deserialize, Job)]
#[job(type = "bench.payload")]
pub struct BenchPayload {
    /// Filler.
    pub text: String,
}

impl Perform for BenchPayload {
    fn perform(&self, _ctx: &mut JobContext<'_>) -> Result<(), JobError> {
        Ok(())
    }
}

/// Pickups (enqueue to claim, by the database's clock, in ms) of the
/// [`BenchPickup`] jobs worked since the last [`take_pickups`].
static PICKUPS: Mutex<Vec<f64>> = Mutex::new(Vec::new());

/// A no-op job that notes its pickup, from its row's creation to its claim
/// (both by the database's clock): the soak's curves, read from the
/// handlers since completed rows are not kept.
#[derive(Debug, Serialize, Deserialize, Job)]
#[job(type = "bench.pickup")]
pub struct BenchPickup {}

impl Perform for BenchPickup {
    fn perform(&self, ctx: &mut JobContext<'_>) -> Result<(), JobError> {
        if let Some(claimed) = ctx.row().claimed_at {
            let ms = (claimed - ctx.enqueued_at())
                .num_microseconds()
                .unwrap_or(0) as f64
                / 1e3;
            lock(&PICKUPS).push(ms);
        }
        Ok(())
    }
}

/// The pickups noted since the last call.
pub(crate) fn take_pickups() -> Vec<f64> {
    std::mem::take(&mut *lock(&PICKUPS))
}

/// The bench's handlers.
pub fn registry() -> Registry {
    Registry::new()
        .register::<BenchNoop>()
        .register::<BenchWork>()
        .register::<BenchPayload>()
        .register::<BenchPickup>()
}

/// Starts recording handler start times.
pub(crate) fn record_starts() {
    *lock(&STARTS) = Some(HashMap::new());
}

/// Stops recording; returns what was recorded.
pub(crate) fn take_starts() -> HashMap<u64, Instant> {
    lock(&STARTS).take().unwrap_or_default()
}

/// Start time of `seq`, if its handler started.
pub(crate) fn started(seq: u64) -> Option<Instant> {
    lock(&STARTS)
        .as_ref()
        .and_then(|starts| starts.get(&seq).copied())
}
