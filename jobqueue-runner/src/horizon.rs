//! The xmin horizon as this runner reads it: one reader that the fetcher's
//! resume points (`claimer/resume.rs`), the vacuum's pacing
//! (`maintenance/vacuum.rs`) and the index upkeep
//! (`maintenance/index_upkeep.rs`) ask, each saying how old a reading it
//! can act on. A reading one of them made serves the others while it is
//! fresh enough for them. The lock is held to copy a reading, never
//! across the read.

use std::sync::Mutex;
use std::time::{Duration, Instant};

use jobqueue_core::engine::{Horizon, QueueSession};

use crate::sync::lock;

/// The last reading of the xmin horizon, and when it was made.
#[derive(Debug, Default)]
pub(crate) struct HorizonReader {
    last: Mutex<Option<(Instant, Horizon)>>,
}

impl HorizonReader {
    /// The horizon as read less than `fresh` ago, else as read now on
    /// `session` (`Duration::ZERO`: always now).
    pub(crate) fn read(
        &self,
        session: &mut QueueSession,
        fresh: Duration,
    ) -> jobqueue_core::Result<Horizon> {
        let cached = lock(&self.last)
            .as_ref()
            .filter(|(at, _)| at.elapsed() < fresh)
            .map(|(_, horizon)| horizon.clone());
        if let Some(horizon) = cached {
            return Ok(horizon);
        }
        let horizon = session.xmin_horizon()?;
        *lock(&self.last) = Some((Instant::now(), horizon.clone()));
        Ok(horizon)
    }
}
