//! The scheduler: runs each maintenance service's passes when they are
//! due, one at a time on the maintenance thread, until the runner stops.
//!
//! Each service says when its next pass is due ([`Service::next_after`]);
//! the scheduler waits for the earliest (services due at once run in the
//! order added) or for the stop signal, whichever comes first, runs it, and
//! logs its report at the level the report asks for. A pass runs to its end
//! before the next begins: a long one (a vacuum, an index rebuild) delays
//! the others by its length. The stop signal is seen between passes; an
//! index rebuild under way is cancelled by it (`index_upkeep.rs`).

use std::sync::Arc;
use std::time::{Duration, Instant};

use crossbeam_channel::Receiver;

use super::admit_keys::AdmitKeys;
use super::context::ServiceContext;
use super::declare_queues::DeclareQueues;
use super::index_upkeep::IndexUpkeep;
use super::periodic::PeriodicJobs;
use super::promote::Promote;
use super::prune::Prune;
use super::queue_gauges::QueueGauges;
use super::reclaim::Reclaim;
use super::rescue::Rescue;
use super::service::{PassReport, Service};
use super::set_aside::SetAsideBacklogs;
use super::vacuum::Vacuum;
use super::workflow_ends::WorkflowEnds;
use crate::backoff::stopped_within;
use crate::claimer::Claimer;
use crate::shared::Shared;

/// Runs a runner's maintenance until `stop` closes: every service, the
/// periodic jobs if the registry declares schedules, the queue gauges if
/// metrics are kept.
pub(crate) fn run(shared: Arc<Shared>, claimer: Arc<Claimer>, stop: Receiver<()>) {
    let mut cx = ServiceContext::of_runner(shared, claimer, stop.clone());
    let config = cx.config();
    let mut scheduler = Scheduler::default();
    scheduler.add(Promote::new(config));
    scheduler.add(AdmitKeys::new(config));
    scheduler.add(WorkflowEnds::new(config));
    scheduler.add(Reclaim::new(config));
    scheduler.add(Rescue::new(config));
    scheduler.add(Prune::new(config));
    scheduler.add(SetAsideBacklogs::new(config));
    scheduler.add(Vacuum::new(config));
    scheduler.add(IndexUpkeep::new(config));
    if !cx
        .shared
        .queues_declared
        .load(std::sync::atomic::Ordering::Acquire)
    {
        scheduler.add(DeclareQueues::new(config));
    }
    if !cx.shared.registry.schedules().is_empty() {
        scheduler.add(PeriodicJobs::default());
    }
    if cx.shared.metrics.is_some() {
        scheduler.add(QueueGauges::new(cx.config()));
    }
    scheduler.run(&mut cx, &stop);
    log::debug!("maintenance stopped");
}

/// A service as the scheduler drives it, whatever its report.
trait Pass: Send {
    /// Runs one pass, logs what it did; returns when the next is due.
    fn pass(&mut self, cx: &mut ServiceContext) -> Duration;

    /// The service's name.
    fn name(&self) -> &'static str;
}

impl<S: Service> Pass for S {
    fn name(&self) -> &'static str {
        self.cadence().name
    }

    fn pass(&mut self, cx: &mut ServiceContext) -> Duration {
        match self.run_once(cx) {
            Ok(report) => {
                if let Some(level) = report.log_level() {
                    log::log!(level, "{report}");
                }
                self.next_after(&report)
            }
            Err(e) => {
                log::debug!(
                    "{} failed: {}",
                    self.cadence().name,
                    crate::health::one_line(&e)
                );
                self.after_error()
            }
        }
    }
}

/// The services, each with when its next pass is due.
#[derive(Default)]
struct Scheduler {
    services: Vec<(Instant, Box<dyn Pass>)>,
}

impl Scheduler {
    /// Adds `service`, its first pass due [`Service::first_after`] from now.
    fn add(&mut self, service: impl Service + 'static) {
        let due = Instant::now() + service.first_after();
        self.services.push((due, Box::new(service)));
    }

    /// Runs the passes as they come due, until `stop` closes.
    fn run(&mut self, cx: &mut ServiceContext, stop: &Receiver<()>) {
        loop {
            let Some((due, service)) = self.services.iter_mut().min_by_key(|(due, _)| *due) else {
                return;
            };
            if stopped_within(stop, due.saturating_duration_since(Instant::now())) {
                return;
            }
            cx.shared.maintenance.begin(service.name());
            let next = service.pass(cx);
            cx.shared.maintenance.end();
            *due = Instant::now() + next;
        }
    }
}
