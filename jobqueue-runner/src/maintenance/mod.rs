//! Maintenance: what every runner does besides running jobs, as services of
//! one shape driven by one scheduler on the runner's maintenance thread.
//!
//! | service | file | a pass | every |
//! | --- | --- | --- | --- |
//! | [`Promote`] | `promote.rs` | moves scheduled jobs that became due to `pending` | `poll_interval`, from the start |
//! | [`AdmitKeys`] | `admit_keys.rs` | admits waiting keyed jobs whose key has room that no completion or notification admitted | `poll_interval` from the start; its sweep of every key, `rescue_interval` |
//! | [`WorkflowEnds`] | `workflow_ends.rs` | settles workflow steps that failed for good or were cancelled, as their workflows say, where no completion, cancel or rescue did | `rescue_interval`, from the start |
//! | [`Reclaim`] | `reclaim.rs` | takes back jobs set aside as unhandled that this runner handles | `rescue_interval`, from the start |
//! | [`Rescue`] | `rescue.rs` | recovers jobs whose lease expired | `rescue_interval` |
//! | [`Prune`] | `prune.rs` | deletes finished jobs past their retention | `prune_interval` |
//! | [`Vacuum`] | `vacuum.rs` | vacuums the jobs table, or looks whether the horizon moved | `vacuum_interval`, backing off while the horizon is held (`vacuum_pacing.rs`) |
//! | [`SetAsideBacklogs`] | `set_aside.rs` | sets aside a batch of a queue's backlog of a type its claims met without a handler | back to back while one lasts, else `poll_interval` |
//! | [`IndexUpkeep`] | `index_upkeep.rs` | rebuilds an index of live jobs a held horizon bloated | `index_upkeep_interval` |
//! | [`DeclareQueues`] | `declare_queues.rs` | applies the queue settings the registry declares, if the start could not | from the start, until one pass succeeds |
//! | [`PeriodicJobs`] | `periodic.rs` | declares the schedules, fires their due slots | until the next slot, at most a minute |
//! | [`QueueGauges`] | `queue_gauges.rs` | computes the table-wide queue gauges, if this runner leads | `metrics_refresh` |
//!
//! Each is a [`Service`]: [`Service::run_once`] does one pass and returns a
//! report of what it did, [`Service::next_after`] says when the next is
//! due given that report (by default, as its [`Cadence`] says). The scheduler (`scheduler.rs`) runs whichever is
//! due next, logs its report, and waits for the next one or the runner's
//! stop; it notes each pass's start and end (`maintenance_progress.rs`), which the runner
//! reports with its presence, so that the doctor sees a pass that never
//! ends. The statements use `SKIP LOCKED`, `VACUUM (SKIP_LOCKED)` and
//! advisory locks, so every runner runs them all at once without
//! colliding.
//!
//! Outside a runner, a pass runs on a [`ServiceContext`] made from a
//! [`RunnerConfig`](crate::RunnerConfig): what a test or a tool uses to run
//! one pass and look at its report.

mod admit_keys;
mod batches;
mod context;
mod declare_queues;
mod index_upkeep;
mod periodic;
mod promote;
mod prune;
mod queue_gauges;
mod reclaim;
mod rescue;
mod scheduler;
mod service;
mod set_aside;
mod vacuum;
mod vacuum_pacing;
mod workflow_ends;

pub use admit_keys::{AdmitKeys, KeysAdmitted};
pub use context::ServiceContext;
pub use declare_queues::{DeclareQueues, QueuesDeclared};
pub use index_upkeep::{IndexUpkeep, IndexUpkeepReport, IndexUpkept, Kept, Upkeep};
pub use periodic::{PeriodicJobs, PeriodicReport};
pub use promote::{Promote, Promoted};
pub use prune::{Prune, PruneReport};
pub use queue_gauges::{GaugesReport, QueueGauges};
pub use reclaim::{Reclaim, Reclaimed};
pub use rescue::{Rescue, RescueReport};
pub(crate) use scheduler::run;
pub use service::{Cadence, PassReport, Service};
pub use set_aside::{SetAsideBacklogs, SetAsideReport};
pub use vacuum::{Vacuum, VacuumReport};
pub use workflow_ends::{EndsSettled, WorkflowEnds};
