//! Tests that need the PostgreSQL cluster and the machine quiet around
//! them, in a test binary of their own that runs after `tests/it/` (their
//! tests still run in parallel with each other):
//!
//! - `resume_claim`'s pinned-horizon tests wait for the transaction
//!   horizon to move on once their pin ends. A snapshot's horizon is the
//!   oldest transaction running anywhere on the cluster, so a long write of
//!   another test, in another database, holds it back as surely as their
//!   own pin.
//! - `rate_limit` and `periodic` measure rates and slots of runner
//!   processes in real time, which a machine busy with the whole suite
//!   slows below the rate they check.
//!
//! The tests that keep a fleet of runner processes busy for seconds and
//! check a rate or a slot against the clock take [`one_fleet_at_a_time`],
//! so two such fleets never share the machine's two cores.

use std::sync::{Mutex, MutexGuard};

/// Held by a test while its fleet of runner processes runs: one fleet at
/// a time (a test that failed while holding it still lets the next run).
pub fn one_fleet_at_a_time() -> MutexGuard<'static, ()> {
    static FLEET: Mutex<()> = Mutex::new(());
    FLEET
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

mod periodic;
mod rate_limit;
mod resume_claim;
