//! Starting and stopping a runner: the threads, the channels between them,
//! and graceful shutdown.
//!
//! ```text
//!  listener ──wake──┐            ┌──> worker ──┐
//!  workers ───wake──┤            ├──> worker ──┤
//!                 fetcher ──jobs─┼──> ...    ──┼──outcomes──> completer
//!                 (claims)       └──> worker ──┘              (batched writes)
//!  lease keeper: renews leases of in-flight jobs, own connection
//!  maintenance: stale-job recovery, pruning
//! ```

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, Sender, bounded, unbounded};
use diesel::PgConnection;
use diesel::r2d2::{ConnectionManager, Pool};

use crate::counters::Counters;
use crate::health::Health;
use crate::job_state::InFlight;
use crate::messages::{Claimed, Outcome, OutcomeKind};
use crate::shared::{Shared, lock};
use crate::{Registry, RunnerConfig, RunnerError, RunnerStats};

/// A configured runner, ready to start.
#[derive(Debug)]
pub struct Runner {
    config: RunnerConfig,
    registry: Registry,
}

/// What a runner did, returned when it has stopped.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunSummary {
    /// Its counters at the end.
    pub stats: RunnerStats,
    /// Handlers still running when the grace period ran out; their jobs are
    /// recovered by lease expiry.
    pub abandoned: usize,
    /// The runner's own threads that panicked (a defect in the runner, not
    /// in a handler: handler panics fail their job), by thread name.
    pub panicked_threads: Vec<String>,
}

impl Runner {
    /// A runner working `registry`'s job types as `config` says.
    pub fn new(config: RunnerConfig, registry: Registry) -> Self {
        Runner { config, registry }
    }

    /// Checks the configuration and starts the runner's threads. The
    /// database need not be up: the threads connect, and reconnect, on their
    /// own, logging an outage once.
    pub fn start(self) -> Result<RunnerHandle, RunnerError> {
        self.config.validate()?;
        self.registry.validate()?;
        // A URL whose TLS settings the listener cannot honour is refused
        // here, not retried forever by the listener.
        let (listener_config, tls) =
            crate::listener_tls::listener_config(&self.config.database_url)?;
        let listener = crate::listener::ListenerConnection {
            config: listener_config,
            tls,
        };
        let config = self.config;
        let pool = Pool::builder()
            .max_size(config.effective_handler_pool_size())
            .min_idle(Some(0))
            .connection_timeout(Duration::from_secs(10))
            .test_on_check_out(true)
            .error_handler(Box::new(PoolErrors))
            .build_unchecked(ConnectionManager::<PgConnection>::new(&config.database_url));
        let (wake_tx, wake_rx) = bounded(1);
        // The runner holds at most this many jobs at once, counting those
        // whose outcome is not written yet; so neither channel ever holds more.
        let most_held = config.max_held();
        let (job_tx, job_rx) = bounded::<Claimed>(most_held);
        let (outcome_tx, outcome_rx) = bounded::<Outcome>(most_held);
        let (stop_fetch_tx, stop_fetch_rx) = bounded::<()>(0);
        let (stop_complete_tx, stop_complete_rx) = bounded::<()>(0);
        let (stop_background_tx, stop_background_rx) = bounded::<()>(0);
        let job_types = self
            .registry
            .job_types()
            .into_iter()
            .map(str::to_owned)
            .collect();
        let shared = Arc::new(Shared {
            job_types,
            registry: self.registry,
            inflight: InFlight::default(),
            health: Health::default(),
            counters: Counters::default(),
            pool,
            stopping: AtomicBool::new(false),
            outstanding: AtomicUsize::new(0),
            wake_below: AtomicUsize::new(0),
            job_micros: std::sync::atomic::AtomicU64::new(0),
            last_start: std::sync::atomic::AtomicU64::new(0),
            epoch: Instant::now(),
            wake: wake_tx,
            config,
        });
        let workers = Arc::new(WorkerSet {
            shared: Arc::clone(&shared),
            jobs: job_rx.clone(),
            outcomes: outcome_tx,
            alive: AtomicUsize::new(0),
            exited: unbounded(),
            next_index: AtomicUsize::new(0),
            handles: Mutex::new(Vec::new()),
        });
        for _ in 0..shared.config.concurrency {
            workers.spawn()?;
        }
        let s = Arc::clone(&shared);
        let hand_back = crate::fetcher::HandBack {
            queued: job_rx.clone(),
            outcomes: workers.outcomes.clone(),
        };
        let fetcher = spawn("jobqueue-fetcher", move || {
            crate::fetcher::run(s, job_tx, hand_back, wake_rx, stop_fetch_rx)
        })?;
        let s = Arc::clone(&shared);
        let completer = spawn("jobqueue-completer", move || {
            crate::completer::run(s, outcome_rx, stop_complete_rx)
        })?;
        let s = Arc::clone(&shared);
        let w = Arc::clone(&workers);
        let stop = stop_background_rx.clone();
        let mut background = vec![spawn("jobqueue-lease", move || {
            crate::lease_keeper::run(s, stop, move || {
                if let Err(e) = w.spawn() {
                    log::error!("cannot start a replacement worker thread: {e}");
                }
            })
        })?];
        let s = Arc::clone(&shared);
        let stop = stop_background_rx.clone();
        background.push(spawn("jobqueue-listener", move || {
            crate::listener::run(s, stop, listener)
        })?);
        let s = Arc::clone(&shared);
        background.push(spawn("jobqueue-maintenance", move || {
            crate::maintenance::run(s, stop_background_rx)
        })?);
        log::info!(
            "runner {} started: {} workers, queues [{}], job types [{}]",
            shared.config.worker_id,
            shared.config.concurrency,
            if shared.config.queues.is_empty() {
                "all".to_owned()
            } else {
                shared.config.queues.join(", ")
            },
            shared.job_types.join(", ")
        );
        Ok(RunnerHandle {
            trigger: ShutdownTrigger {
                shared: Arc::clone(&shared),
                stop_fetch: Arc::new(Mutex::new(Some(stop_fetch_tx))),
            },
            shared,
            workers,
            unstarted: job_rx,
            threads: Some(Threads {
                fetcher,
                completer,
                stop_complete: stop_complete_tx,
                background,
                stop_background: stop_background_tx,
            }),
        })
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

fn spawn(name: &str, f: impl FnOnce() + Send + 'static) -> Result<JoinHandle<()>, RunnerError> {
    Ok(std::thread::Builder::new().name(name.to_owned()).spawn(f)?)
}

/// The worker threads, which can grow a replacement for one stuck in a handler.
struct WorkerSet {
    shared: Arc<Shared>,
    jobs: Receiver<Claimed>,
    outcomes: Sender<Outcome>,
    alive: AtomicUsize,
    /// One message per worker thread that exits.
    exited: (Sender<()>, Receiver<()>),
    next_index: AtomicUsize,
    handles: Mutex<Vec<JoinHandle<()>>>,
}

impl WorkerSet {
    fn spawn(self: &Arc<Self>) -> Result<(), RunnerError> {
        let index = self.next_index.fetch_add(1, Ordering::Relaxed);
        let set = Arc::clone(self);
        self.alive.fetch_add(1, Ordering::AcqRel);
        let spawned = spawn(&format!("jobqueue-worker-{index}"), move || {
            // Counts the thread out however it ends, a panic included.
            let _exit = WorkerExit(Arc::clone(&set));
            crate::worker::run(
                Arc::clone(&set.shared),
                set.jobs.clone(),
                set.outcomes.clone(),
            );
        });
        match spawned {
            Ok(handle) => {
                lock(&self.handles).push(handle);
                Ok(())
            }
            Err(e) => {
                self.alive.fetch_sub(1, Ordering::AcqRel);
                Err(e)
            }
        }
    }
}

/// Counts a worker thread out of its set when the thread ends.
struct WorkerExit(Arc<WorkerSet>);

impl Drop for WorkerExit {
    fn drop(&mut self) {
        self.0.alive.fetch_sub(1, Ordering::AcqRel);
        let _ = self.0.exited.0.send(());
    }
}

/// Begins a runner's graceful shutdown; cheap to clone (e.g. into a signal
/// handler thread). Calling it more than once is harmless.
#[derive(Clone)]
pub struct ShutdownTrigger {
    shared: Arc<Shared>,
    stop_fetch: Arc<Mutex<Option<Sender<()>>>>,
}

impl std::fmt::Debug for ShutdownTrigger {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ShutdownTrigger").finish_non_exhaustive()
    }
}

impl ShutdownTrigger {
    /// Stops claiming; claimed jobs not yet started go back to pending; jobs
    /// in flight get the grace period.
    pub fn shutdown(&self) {
        if !self.shared.stopping.swap(true, Ordering::AcqRel) {
            log::info!(
                "shutting down: no new claims; in-flight jobs get {:?}",
                self.shared.config.shutdown_grace
            );
        }
        lock(&self.stop_fetch).take();
    }
}

/// A running runner. Dropping it shuts the runner down gracefully and
/// waits until it has stopped, as [`RunnerHandle::shutdown`] does.
pub struct RunnerHandle {
    trigger: ShutdownTrigger,
    shared: Arc<Shared>,
    workers: Arc<WorkerSet>,
    unstarted: Receiver<Claimed>,
    /// The threads to join; taken when the runner has been waited for.
    threads: Option<Threads>,
}

/// The runner's threads besides its workers, and the channels that stop them.
struct Threads {
    fetcher: JoinHandle<()>,
    completer: JoinHandle<()>,
    stop_complete: Sender<()>,
    background: Vec<JoinHandle<()>>,
    stop_background: Sender<()>,
}

impl std::fmt::Debug for RunnerHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RunnerHandle")
            .field("worker_id", &self.shared.config.worker_id)
            .finish_non_exhaustive()
    }
}

impl RunnerHandle {
    /// A handle that begins shutdown from elsewhere (another thread, a
    /// signal handler).
    pub fn trigger(&self) -> ShutdownTrigger {
        self.trigger.clone()
    }

    /// The runner's counters so far.
    pub fn stats(&self) -> RunnerStats {
        self.shared.counters.snapshot()
    }

    /// Jobs claimed by this runner and not yet finished.
    pub fn in_flight(&self) -> usize {
        self.shared.inflight.len()
    }

    /// The worker id written on claimed rows.
    pub fn worker_id(&self) -> &str {
        &self.shared.config.worker_id
    }

    /// Shuts down gracefully and waits until done: see [`RunnerHandle::wait`].
    pub fn shutdown(self) -> RunSummary {
        self.trigger.shutdown();
        self.wait()
    }

    /// Waits until the runner has stopped (after a [`ShutdownTrigger`] fired):
    /// in-flight handlers finish within the grace period, unstarted claims
    /// are handed back without using up an attempt, and every outcome is
    /// written. Handlers still running after the grace period are left to
    /// lease expiry.
    pub fn wait(mut self) -> RunSummary {
        self.join()
    }

    fn join(&mut self) -> RunSummary {
        let mut panicked_threads = Vec::new();
        let mut join = |handle: JoinHandle<()>| {
            let name = handle.thread().name().unwrap_or("unnamed").to_owned();
            if handle.join().is_err() {
                log::error!("runner thread {name} panicked");
                panicked_threads.push(name);
            }
        };
        let Some(threads) = self.threads.take() else {
            return self.summary(0, panicked_threads);
        };
        join(threads.fetcher);
        // The fetcher dropped its sender: workers hand back what is queued
        // and exit when idle. Give busy ones the grace period.
        let deadline = Instant::now() + self.shared.config.shutdown_grace;
        while self.workers.alive.load(Ordering::Acquire) > 0 {
            if self.workers.exited.1.recv_deadline(deadline).is_err() {
                break;
            }
        }
        let mut abandoned = 0;
        if self.workers.alive.load(Ordering::Acquire) > 0 {
            // Workers are stuck in handlers: hand back what they never started.
            while let Ok(claimed) = self.unstarted.try_recv() {
                let _ = self
                    .workers
                    .outcomes
                    .send(Outcome::new(&claimed.state, OutcomeKind::Release));
            }
            abandoned = self.workers.alive.load(Ordering::Acquire);
            log::warn!(
                "{abandoned} handlers still running after the grace period; their leases will expire"
            );
        } else {
            let workers: Vec<_> = lock(&self.workers.handles).drain(..).collect();
            for handle in workers {
                join(handle);
            }
        }
        drop(threads.stop_complete);
        join(threads.completer);
        drop(threads.stop_background);
        for handle in threads.background {
            join(handle);
        }
        self.summary(abandoned, panicked_threads)
    }

    fn summary(&self, abandoned: usize, panicked_threads: Vec<String>) -> RunSummary {
        let stats = self.shared.counters.snapshot();
        log::info!("runner stopped: {stats:?}");
        RunSummary {
            stats,
            abandoned,
            panicked_threads,
        }
    }
}

impl Drop for RunnerHandle {
    fn drop(&mut self) {
        if self.threads.is_some() {
            self.trigger.shutdown();
            self.join();
        }
    }
}
