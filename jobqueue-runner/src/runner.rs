//! Starting and stopping a runner: the threads, the channels between them,
//! and graceful shutdown.
//!
//! ```text
//!  listener ──announce──> fetcher ──jobs──┐   ┌──> worker ──┐
//!       claims-0, claims-1 <─claims─┘ ^         ├───┼──> ...    ──┼──outcomes──> completer
//!                 └─────reports───────┘         │   └──> worker ──┘   (completer.rs)    
//!                     (dispatch: one line per queue)
//!  completer ──room freed: wake──> fetcher;  ──finished keys──> admitter ──wake──> fetcher
//!  lease keeper: renews leases of in-flight jobs (a lost one: wake), own connection
//!  maintenance: one scheduler of the services in maintenance/ (promote, admit keys,
//!    workflow ends, reclaim, rescue, prune, set aside, vacuum, index upkeep,
//!    declared queues, periodic jobs, gauges)
//!  metrics server: serves /metrics when asked to (`MetricsMode::Serve`)
//!  watchdog: ends hung connections, and the runner's own once its time to
//!            stop ran out; started first, stopped last
//! ```
//!
//! The guide's "How it works" page (`docs/src/how-it-works.md`) draws it
//! whole, with what each thread sends to whom.
//!
//! Every connection is made by the connector (`connector/`).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Instant;

use crossbeam_channel::{Receiver, Sender, bounded};

use crate::claimer::Claimer;
use crate::dispatch::JobReceiver;
use crate::messages::{Outcome, OutcomeKind};
use crate::shared::Shared;
use crate::sync::lock;
use crate::{Registry, RunnerConfig, RunnerError, RunnerStats};

/// A configured runner, ready to start.
#[derive(Debug)]
pub struct Runner {
    config: RunnerConfig,
    registry: Registry,
    metrics_limits: crate::MetricsLimits,
    /// The application's runtime for async handlers, if it gives one.
    #[cfg(feature = "async")]
    async_runtime: Option<tokio::runtime::Handle>,
}

/// What a runner did, returned when it has stopped.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
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
        Runner {
            config,
            registry,
            metrics_limits: crate::MetricsLimits::default(),
            #[cfg(feature = "async")]
            async_runtime: None,
        }
    }

    /// Runs the async handlers' attempts on the application's runtime
    /// (`handle`, of a multi-threaded runtime with its time driver on)
    /// rather than one the runner makes (of `async_threads` threads).
    /// Attempts the runner's shutdown gives up on are dropped with that
    /// runtime, not by the runner.
    #[cfg(feature = "async")]
    pub fn async_runtime(mut self, handle: tokio::runtime::Handle) -> Self {
        self.async_runtime = Some(handle);
        self
    }

    /// Sets the timeouts and size limits of the metrics endpoint (when the
    /// configuration serves one); [`MetricsLimits::default`](crate::MetricsLimits::default) otherwise.
    pub fn metrics_limits(mut self, limits: crate::MetricsLimits) -> Self {
        self.metrics_limits = limits;
        self
    }

    /// Checks the configuration and starts the runner's threads. The
    /// database need not be up: the threads connect, and reconnect, on their
    /// own, logging an outage once.
    pub fn start(self) -> Result<RunnerHandle, RunnerError> {
        let mut config = self.config;
        self.registry.validate()?;
        // The workers the code declares for a queue it works, unless the
        // configuration names the queue's own.
        for queue in self.registry.declared_queues() {
            let works = config.queues.is_empty() || config.queues.iter().any(|q| q == queue.name());
            if let Some(most) = queue.declared_workers()
                && works
            {
                config
                    .queue_concurrency
                    .entry(queue.name().to_owned())
                    .or_insert(most);
            }
        }
        config.validate()?;
        #[cfg(feature = "async")]
        let async_runtime = async_runtime(&config, &self.registry, self.async_runtime)?;
        // Watching from the first connection on; it stops when the runner
        // has stopped (or when `start` fails, with its sender).
        let watchdog = Arc::new(crate::hang_guard::Watchdog::default());
        let (watchdog_stop, stop) = bounded::<()>(0);
        let w = Arc::clone(&watchdog);
        let watchdog_thread = spawn("jobqueue-watchdog", move || {
            crate::hang_guard::run(&w, &stop)
        })?;
        // A URL whose TLS settings the listener cannot honour is refused
        // here, not retried forever by the listener.
        let connector = Arc::new(crate::connector::Connector::new(
            &config.database_url,
            config.db_timeout,
            Arc::clone(&watchdog),
        )?);
        connector.check_own_sessions()?;
        connector.check_schema()?;
        let declared = connector.declare_queues(self.registry.declared_queues())?;
        // Bound before anything starts: a taken address refuses the start.
        let metrics_server = match config.metrics {
            crate::MetricsMode::Serve(addr) => {
                Some(crate::metrics_server::MetricsServer::bind(addr)?)
            }
            _ => None,
        };
        let (claimer, wakeups) = Claimer::new(&config);
        // The runner holds at most this many jobs at once, counting those
        // whose outcome is not written yet; so neither channel ever holds more.
        let most_held = config.max_held();
        let (job_tx, job_rx) = crate::dispatch::dispatch(most_held);
        let (outcome_tx, outcome_rx) = bounded::<Outcome>(most_held);
        // Shutdown is disconnection, as crossbeam's docs describe it: the
        // trigger drops the only sender of `shutdown`; each worker holds a
        // sender of `exited`, which disconnects when the last one ends; the
        // outcome channel disconnects when the fetcher, the workers and the
        // handle are done with it; the handle drops the sender of `last`
        // after the completer, which stops the lease keeper, the listener
        // and maintenance.
        let (shutdown_tx, shutdown_rx) = bounded::<()>(0);
        let (exited_tx, exited_rx) = bounded::<()>(0);
        let (last_tx, last_rx) = bounded::<()>(0);
        let shared = Shared::new(
            config,
            self.registry,
            shutdown_rx.clone(),
            watchdog,
            connector,
        );
        shared
            .queues_declared
            .store(declared, std::sync::atomic::Ordering::Release);
        #[cfg(feature = "async")]
        let own_runtime = async_runtime.map(|(handle, own)| {
            let _ = shared.tasks.set(crate::async_runtime::Tasks::new(handle));
            own
        });
        let hand_back = crate::claimer::HandBack {
            queued: job_rx.clone(),
            outcomes: outcome_tx.clone(),
        };
        let workers = Arc::new(WorkerSet {
            shared: Arc::clone(&shared),
            jobs: job_rx.clone(),
            senders: Mutex::new(Some((outcome_tx, exited_tx))),
            exited: exited_rx,
            next_index: AtomicUsize::new(0),
            handles: Mutex::new(Vec::new()),
        });
        for _ in 0..shared.config.worker_threads() {
            workers.spawn()?;
        }
        let claimer_threads = claimer.start(&shared, job_tx, hand_back, wakeups, shutdown_rx)?;
        let (s, c) = (Arc::clone(&shared), Arc::clone(&claimer));
        let completer = spawn("jobqueue-completer", move || {
            crate::completer::run(s, &c, outcome_rx)
        })?;
        let (s, c) = (Arc::clone(&shared), Arc::clone(&claimer));
        let w = Arc::clone(&workers);
        let stop = last_rx.clone();
        let mut background = vec![spawn("jobqueue-lease", move || {
            crate::lease_keeper::run(s, &c, stop, move || {
                if let Err(e) = w.spawn() {
                    log::error!("cannot start a replacement worker thread: {e}");
                }
            })
        })?];
        let (s, c) = (Arc::clone(&shared), Arc::clone(&claimer));
        let stop = last_rx.clone();
        background.push(spawn("jobqueue-admitter", move || {
            c.run_admitter(&s, &stop)
        })?);
        let (s, c) = (Arc::clone(&shared), Arc::clone(&claimer));
        let stop = last_rx.clone();
        background.push(spawn("jobqueue-listener", move || {
            crate::listener::run(s, &c, stop)
        })?);
        let registry = crate::exposition::registry(&shared).map(Arc::new);
        if let (Some(server), Some(registry)) = (metrics_server, &registry) {
            log::info!("serving metrics at http://{}/metrics", server.addr());
            let (registry, stop) = (Arc::clone(registry), last_rx.clone());
            let limits = self.metrics_limits;
            background.push(spawn("jobqueue-metrics", move || {
                server.serve(registry, limits, stop)
            })?);
        }
        let (s, c) = (Arc::clone(&shared), Arc::clone(&claimer));
        background.push(spawn("jobqueue-maintenance", move || {
            crate::maintenance::run(s, c, last_rx)
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
                broadcast: Arc::new(Mutex::new(Some(shutdown_tx))),
            },
            shared,
            registry,
            workers,
            unstarted: job_rx,
            #[cfg(feature = "async")]
            own_runtime: own_runtime.flatten(),
            threads: Some(Threads {
                claimer: claimer_threads,
                completer,
                background,
                last: last_tx,
                watchdog: (watchdog_stop, watchdog_thread),
            }),
        })
    }
}

/// The runtime for `registry`'s async handlers, if it has any: the
/// application's `given`, or one of the runner's own (returned with it, to
/// shut down when the runner stops).
#[cfg(feature = "async")]
fn async_runtime(
    config: &RunnerConfig,
    registry: &Registry,
    given: Option<tokio::runtime::Handle>,
) -> Result<
    Option<(
        tokio::runtime::Handle,
        Option<crate::async_runtime::OwnRuntime>,
    )>,
    RunnerError,
> {
    if !registry.has_async() {
        return Ok(None);
    }
    if let Some(handle) = given {
        if handle.runtime_flavor() != tokio::runtime::RuntimeFlavor::MultiThread {
            return Err(RunnerError::Config(
                "the runtime given for async handlers is single-threaded: give a \
                 multi-threaded one (middleware around an async handler blocks in place)"
                    .into(),
            ));
        }
        return Ok(Some((handle, None)));
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(config.async_threads)
        .thread_name("jobqueue-async")
        .enable_all()
        .build()?;
    Ok(Some((
        runtime.handle().clone(),
        Some(crate::async_runtime::OwnRuntime::new(runtime)),
    )))
}

fn spawn(name: &str, f: impl FnOnce() + Send + 'static) -> Result<JoinHandle<()>, RunnerError> {
    Ok(std::thread::Builder::new().name(name.to_owned()).spawn(f)?)
}

/// The worker threads, which can grow a replacement for one stuck in a handler.
struct WorkerSet {
    shared: Arc<Shared>,
    jobs: JobReceiver,
    /// What each new worker gets a copy of: the outcome channel, and its
    /// membership of `exited`. Taken when the runner stops, so no worker is
    /// started after that and both channels can disconnect.
    senders: Mutex<Option<(Sender<Outcome>, Sender<()>)>>,
    /// Disconnects when every worker thread has ended (a panic included).
    exited: Receiver<()>,
    next_index: AtomicUsize,
    handles: Mutex<Vec<JoinHandle<()>>>,
}

impl WorkerSet {
    /// Starts a worker thread; does nothing once the runner is stopping.
    fn spawn(self: &Arc<Self>) -> Result<(), RunnerError> {
        let Some((outcomes, member)) = lock(&self.senders).clone() else {
            return Ok(());
        };
        let index = self.next_index.fetch_add(1, Ordering::Relaxed);
        let shared = Arc::clone(&self.shared);
        let jobs = self.jobs.clone();
        let handle = spawn(&format!("jobqueue-worker-{index}"), move || {
            // `member` is held until the thread ends, however it ends.
            crate::worker::run(shared, jobs, outcomes, member);
        })?;
        lock(&self.handles).push(handle);
        Ok(())
    }
}

/// Begins a runner's graceful shutdown; cheap to clone (e.g. into a signal
/// handler thread). Calling it more than once is harmless.
#[derive(Clone)]
pub struct ShutdownTrigger {
    shared: Arc<Shared>,
    /// The only sender of the shutdown broadcast: dropping it is the signal.
    broadcast: Arc<Mutex<Option<Sender<()>>>>,
}

impl std::fmt::Debug for ShutdownTrigger {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ShutdownTrigger").finish_non_exhaustive()
    }
}

impl ShutdownTrigger {
    /// Asks the runner to shut down and returns at once (it never waits:
    /// [`RunnerHandle::wait`] or [`RunnerHandle::shutdown`] does). The
    /// runner stops claiming; claimed jobs not yet started go back to
    /// pending; jobs in flight get the grace period.
    pub fn request_shutdown(&self) {
        let Some(broadcast) = lock(&self.broadcast).take() else {
            return;
        };
        let _ = self.shared.shutdown_at.set(Instant::now());
        // Past the grace period, calls and connection attempts get the
        // database timeout at most (see `hang_guard`).
        if let Some(deadline) = self.shared.stop_deadline() {
            self.shared.watchdog.stop_by(deadline);
        }
        log::info!(
            "shutting down: no new claims; in-flight jobs get {:?}",
            self.shared.config.shutdown_grace
        );
        drop(broadcast);
    }
}

/// A running runner. Dropping it shuts the runner down gracefully and
/// waits until it has stopped, as [`RunnerHandle::shutdown`] does.
pub struct RunnerHandle {
    trigger: ShutdownTrigger,
    shared: Arc<Shared>,
    /// The metrics, when kept.
    registry: Option<Arc<prometheus_client::registry::Registry>>,
    workers: Arc<WorkerSet>,
    unstarted: JobReceiver,
    /// The runtime the runner made for its async handlers, shut down when
    /// it has stopped.
    #[cfg(feature = "async")]
    own_runtime: Option<crate::async_runtime::OwnRuntime>,
    /// The threads to join; taken when the runner has been waited for.
    threads: Option<Threads>,
}

/// The runner's threads besides its workers.
struct Threads {
    claimer: crate::claimer::Threads,
    completer: JoinHandle<()>,
    background: Vec<JoinHandle<()>>,
    /// Dropped after the completer: stops the lease keeper, the listener
    /// and maintenance.
    last: Sender<()>,
    /// Dropped last, once every other thread ended: stops the watchdog,
    /// which bounds their calls until then.
    watchdog: (Sender<()>, JoinHandle<()>),
}

impl std::fmt::Debug for RunnerHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.shared.debug_as(f, "RunnerHandle")
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

    /// The runner's Prometheus metrics as OpenMetrics text (what
    /// `GET /metrics` answers), or `None` when `RunnerConfig::metrics` is
    /// off. For an application that serves them from its own HTTP server.
    pub fn metrics_text(&self) -> Option<String> {
        self.registry.as_deref().map(crate::exposition::encode)
    }

    /// Jobs claimed by this runner and not yet finished.
    pub fn in_flight(&self) -> usize {
        self.shared.inflight.len()
    }

    /// The worker id written on claimed rows.
    pub fn worker_id(&self) -> &str {
        &self.shared.config.worker_id
    }

    /// Shuts down gracefully and waits until done (up to the grace period
    /// for jobs in flight): [`ShutdownTrigger::request_shutdown`], then
    /// [`RunnerHandle::wait`].
    pub fn shutdown(self) -> RunSummary {
        self.trigger.request_shutdown();
        self.wait()
    }

    /// Waits until the runner has stopped (after
    /// [`ShutdownTrigger::request_shutdown`]):
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
        join(threads.claimer.fetcher);
        for connection in threads.claimer.connections {
            join(connection);
        }
        // No worker starts from now on; the handle keeps one sender of the
        // outcome channel to hand back what stuck workers never started.
        let senders = lock(&self.workers.senders).take();
        let hand_back = senders.map(|(outcomes, member)| {
            drop(member);
            outcomes
        });
        // The fetcher is gone: workers hand back what is queued and end when
        // idle. Busy ones get the grace period.
        let deadline = self
            .shared
            .grace_deadline()
            .unwrap_or_else(|| Instant::now() + self.shared.config.shutdown_grace);
        let all_ended = matches!(
            self.workers.exited.recv_deadline(deadline),
            Err(crossbeam_channel::RecvTimeoutError::Disconnected)
        );
        let workers: Vec<JoinHandle<()>> = lock(&self.workers.handles).drain(..).collect();
        let mut abandoned = 0;
        if all_ended {
            for handle in workers {
                join(handle);
            }
        } else {
            // Workers are stuck in handlers: hand back what they never started.
            if let Some(outcomes) = &hand_back {
                while let Some(claimed) = self.unstarted.try_recv() {
                    let _ = outcomes.send(Outcome::new(&claimed.state, OutcomeKind::Release));
                }
            }
            for handle in workers {
                if handle.is_finished() {
                    join(handle);
                } else {
                    abandoned += 1;
                }
            }
            #[cfg(feature = "async")]
            if let Some(tasks) = self.shared.tasks.get() {
                abandoned += tasks.live();
            }
            log::warn!(
                "{abandoned} handlers still running after the grace period; their leases will expire"
            );
        }
        drop(hand_back);
        // The completer ends once every outcome is written (or, with stuck
        // handlers, at the grace deadline).
        join(threads.completer);
        drop(threads.last);
        for handle in threads.background {
            join(handle);
        }
        let (stop, watchdog) = threads.watchdog;
        drop(stop);
        join(watchdog);
        // Async attempts still running past the grace period are dropped
        // with the runtime; their leases expire as stuck threads' do.
        #[cfg(feature = "async")]
        drop(self.own_runtime.take());
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
            self.trigger.request_shutdown();
            self.join();
        }
    }
}
