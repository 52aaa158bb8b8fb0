//! What a maintenance pass runs with: the maintenance connection, and the
//! runner's configuration, metrics, health and claimer.

use std::sync::Arc;

use crossbeam_channel::{Receiver, Sender};
use jobqueue_core::engine::QueueSession;

use crate::claimer::Claimer;
use crate::db::Db;
use crate::shared::Shared;
use crate::{Registry, RunnerConfig, RunnerError};

/// What a [`Service`](super::Service)'s pass runs with: one connection to
/// the queue's database (made when first needed, made again after it
/// breaks) and the runner's configuration and registry.
///
/// Inside a runner, its maintenance thread has one, with the runner's
/// metrics and claimer (a rescue wakes it). [`ServiceContext::new`] makes
/// one outside any runner, for a test or a tool to run a pass and read its
/// report.
pub struct ServiceContext {
    pub(super) shared: Arc<Shared>,
    /// The claimer to wake when jobs become due (none outside a runner).
    pub(super) claimer: Option<Arc<Claimer>>,
    db: Db,
    /// Closed when the runner stops (never, outside a runner).
    stop: Receiver<()>,
    /// Keeps `stop` open outside a runner.
    _open: Option<Sender<()>>,
}

impl std::fmt::Debug for ServiceContext {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.shared.debug_as(f, "ServiceContext")
    }
}

impl ServiceContext {
    /// A context for running passes outside a runner, on the database of
    /// `config` (checked as [`Runner::start`](crate::Runner::start) checks
    /// it), for a runner of `registry`'s job types. Connects at the first
    /// pass. Metrics are kept if `config` keeps them (what
    /// [`QueueGauges`](super::QueueGauges) computes); no claimer is woken.
    pub fn new(config: RunnerConfig, registry: Registry) -> Result<Self, RunnerError> {
        config.validate()?;
        let watchdog = Arc::new(crate::hang_guard::Watchdog::default());
        let connector = Arc::new(crate::connector::Connector::new(
            &config.database_url,
            config.db_timeout,
            Arc::clone(&watchdog),
        )?);
        let (open, stop) = crossbeam_channel::bounded(0);
        let shared = Shared::new(config, registry, stop.clone(), watchdog, connector);
        Ok(Self::of(shared, None, stop, Some(open)))
    }

    /// The context of a runner's maintenance thread, `stop` closed when the
    /// runner stops.
    pub(crate) fn of_runner(
        shared: Arc<Shared>,
        claimer: Arc<Claimer>,
        stop: Receiver<()>,
    ) -> Self {
        Self::of(shared, Some(claimer), stop, None)
    }

    fn of(
        shared: Arc<Shared>,
        claimer: Option<Arc<Claimer>>,
        stop: Receiver<()>,
        open: Option<Sender<()>>,
    ) -> Self {
        ServiceContext {
            db: Db::new(&shared, "maintenance"),
            shared,
            claimer,
            stop,
            _open: open,
        }
    }

    /// The runner's configuration.
    pub fn config(&self) -> &RunnerConfig {
        &self.shared.config
    }

    /// Runs `f` on the connection (see `Db::run`): a round trip the hang
    /// guard ends after `db_timeout`.
    pub(super) fn run<T>(
        &mut self,
        f: impl FnOnce(&mut QueueSession) -> jobqueue_core::Result<T>,
    ) -> jobqueue_core::Result<T> {
        self.db.run(&self.shared.health, f)
    }

    /// [`ServiceContext::run`] for a statement that takes as long as it
    /// takes (`VACUUM`, `REINDEX`).
    pub(super) fn run_unbounded<T>(
        &mut self,
        f: impl FnOnce(&mut QueueSession) -> jobqueue_core::Result<T>,
    ) -> jobqueue_core::Result<T> {
        self.db.run_unbounded(&self.shared.health, f)
    }

    /// Closed when the runner stops.
    pub(super) fn stop(&self) -> &Receiver<()> {
        &self.stop
    }
}
