//! What the runner's threads share: configuration, handlers, the jobs in
//! flight, counters, the database's health and its connections. What to
//! claim and when is the claimer's own (`claimer/`).

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use diesel::r2d2::Pool;

use crate::counters::Counters;
use crate::health::Health;
use crate::job_state::InFlight;
use crate::{Registry, RunnerConfig};

/// Handler connections.
pub(crate) type HandlerPool = Pool<crate::connector::HandlerConnections>;

/// Everything the runner's threads share.
pub(crate) struct Shared {
    pub(crate) config: RunnerConfig,
    pub(crate) registry: Registry,
    pub(crate) job_types: Vec<String>,
    pub(crate) inflight: InFlight,
    pub(crate) health: Health,
    pub(crate) counters: Counters,
    /// Prometheus metrics, when kept (see `RunnerConfig::metrics`).
    pub(crate) metrics: Option<crate::metrics::Metrics>,
    /// Workers running a handler now (counted while metrics are kept).
    pub(crate) busy_workers: AtomicUsize,
    pub(crate) pool: HandlerPool,
    /// The shutdown broadcast: disconnected when shutdown begins (claiming
    /// stops; claimed jobs not yet started are handed back).
    pub(crate) shutdown: crossbeam_channel::Receiver<()>,
    /// When the shutdown began (set just before the broadcast).
    pub(crate) shutdown_at: std::sync::OnceLock<Instant>,
    /// Moving average of handler run time, in microseconds.
    pub(crate) job_micros: AtomicU64,
    /// When a worker last started a job, in microseconds since `epoch`.
    pub(crate) last_start: AtomicU64,
    /// The runner's start, the origin of `last_start`.
    pub(crate) epoch: Instant,
    /// Ends the connections that stop answering, and every connection of
    /// the runner's own threads at its stop deadline.
    pub(crate) watchdog: Arc<crate::hang_guard::Watchdog>,
    /// Makes every connection the runner opens.
    pub(crate) connector: Arc<crate::connector::Connector>,
    /// Where the maintenance thread is (reported with the runner's
    /// presence).
    pub(crate) maintenance: crate::maintenance_progress::MaintenanceProgress,
    /// The xmin horizon's last reading, shared by those that act on it.
    pub(crate) horizon: crate::horizon::HorizonReader,
    /// The registry's declared queues were applied at the start (else the
    /// maintenance applies them).
    pub(crate) queues_declared: std::sync::atomic::AtomicBool,
    /// The runtime async handlers run on, once the runner made or was
    /// given one (only when an async type is registered).
    #[cfg(feature = "async")]
    pub(crate) tasks: std::sync::OnceLock<crate::async_runtime::Tasks>,
}

impl Shared {
    /// Formats a value that holds this runner's shared state as `name {
    /// worker_id: .., .. }`: the one field that tells runners apart.
    pub(crate) fn debug_as(&self, f: &mut std::fmt::Formatter<'_>, name: &str) -> std::fmt::Result {
        f.debug_struct(name)
            .field("worker_id", &self.config.worker_id)
            .finish_non_exhaustive()
    }

    /// What the threads of a runner configured by `config` (its URL
    /// completed already) for `registry`'s job types share, `shutdown` its
    /// shutdown broadcast, its connections made by `connector` and watched
    /// by `watchdog`. Nothing connects yet: the handler pool opens
    /// connections as handlers ask for them.
    pub(crate) fn new(
        config: RunnerConfig,
        registry: Registry,
        shutdown: crossbeam_channel::Receiver<()>,
        watchdog: Arc<crate::hang_guard::Watchdog>,
        connector: Arc<crate::connector::Connector>,
    ) -> Arc<Shared> {
        let pool = Pool::builder()
            .max_size(config.effective_handler_pool_size())
            .min_idle(Some(0))
            .connection_timeout(Duration::from_secs(10))
            .test_on_check_out(true)
            .error_handler(Box::new(PoolErrors))
            .build_unchecked(crate::connector::HandlerConnections::new(Arc::clone(
                &connector,
            )));
        let job_types = registry
            .job_types()
            .into_iter()
            .map(str::to_owned)
            .collect();
        Arc::new(Shared {
            job_types,
            registry,
            inflight: InFlight::default(),
            health: Health::default(),
            counters: Counters::default(),
            metrics: (config.metrics != crate::MetricsMode::Off).then(crate::metrics::Metrics::new),
            busy_workers: AtomicUsize::new(0),
            pool,
            shutdown,
            shutdown_at: std::sync::OnceLock::new(),
            job_micros: AtomicU64::new(0),
            last_start: AtomicU64::new(0),
            epoch: Instant::now(),
            watchdog,
            connector,
            maintenance: crate::maintenance_progress::MaintenanceProgress::default(),
            horizon: crate::horizon::HorizonReader::default(),
            queues_declared: std::sync::atomic::AtomicBool::new(false),
            #[cfg(feature = "async")]
            tasks: std::sync::OnceLock::new(),
            config,
        })
    }

    pub(crate) fn is_stopping(&self) -> bool {
        crate::backoff::is_stopped(&self.shutdown)
    }

    /// Until when the runner waits for in-flight handlers (and their
    /// outcomes) once shutdown began: the grace period.
    pub(crate) fn grace_deadline(&self) -> Option<Instant> {
        self.shutdown_at
            .get()
            .map(|at| *at + self.config.shutdown_grace)
    }

    /// When the runner must be done once shutdown began: the grace period
    /// plus the database timeout (see `hang_guard`).
    pub(crate) fn stop_deadline(&self) -> Option<Instant> {
        self.grace_deadline().map(|at| at + self.config.db_timeout)
    }

    /// Microseconds since the runner started.
    pub(crate) fn micros_now(&self) -> u64 {
        self.epoch.elapsed().as_micros().min(u128::from(u64::MAX)) as u64
    }

    /// Folds one handler run time into the moving average (1/16 weight).
    pub(crate) fn note_job_time(&self, took: Duration) {
        let sample = took.as_micros().min(u128::from(u32::MAX)) as u64;
        let old = self.job_micros.load(Ordering::Relaxed);
        let new = if old == 0 {
            sample.max(1)
        } else {
            (old * 15 + sample) / 16
        };
        self.job_micros.store(new.max(1), Ordering::Relaxed);
    }
}

/// Connection errors of the handler pool: a handler that gets no
/// connection fails its attempt with the reason, and outages are logged once
/// by the runner's own threads, so the pool's own reports are debug lines.
#[derive(Debug)]
struct PoolErrors;

impl diesel::r2d2::HandleError<diesel::r2d2::Error> for PoolErrors {
    fn handle_error(&self, error: diesel::r2d2::Error) {
        log::debug!("handler pool: {}", crate::health::one_line(&error));
    }
}
