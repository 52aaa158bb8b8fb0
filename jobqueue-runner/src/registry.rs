//! The handlers a runner knows, by job type, and the application state
//! they may reach; and the traits a job type's handler implements
//! (`Perform`, on a worker thread, and `AsyncPerform`, as a task).

use jobqueue_core::{Job, JobOptions, NewJob, Periodic, QueueConfig, RetryPolicy};
use std::any::{Any, TypeId};
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use crate::{JobContext, JobError, Lifecycle, Middleware};

/// A registered type's handler: its payload decoded, then `perform`.
pub(crate) type HandlerFn =
    dyn Fn(&serde_json::Value, &mut JobContext<'_>) -> Result<(), JobError> + Send + Sync;

/// An async handler's attempt, not started: the future borrows the
/// payload and the context.
#[cfg(feature = "async")]
pub(crate) type AttemptFuture<'c> =
    std::pin::Pin<Box<dyn std::future::Future<Output = Result<(), JobError>> + Send + 'c>>;

/// A registered async type's handler: its payload decoded, then its
/// `perform`'s future.
#[cfg(feature = "async")]
pub(crate) type AsyncHandlerFn = dyn for<'c, 'a> Fn(&'c serde_json::Value, &'c mut JobContext<'a>) -> AttemptFuture<'c>
    + Send
    + Sync;

/// How a registered type is worked.
#[derive(Clone)]
pub(crate) enum Body {
    /// On a worker thread ([`Perform`]).
    Thread(Arc<HandlerFn>),
    /// As a task of the runner's runtime ([`crate::AsyncPerform`]).
    #[cfg(feature = "async")]
    Async(Arc<AsyncHandlerFn>),
}

/// One registered job type.
#[derive(Clone)]
pub(crate) struct Handler {
    pub(crate) body: Body,
    pub(crate) timeout: Option<Duration>,
    /// The type's own backoff, if it declares one.
    pub(crate) retry: Option<RetryPolicy>,
    /// Builds a job of this type from JSON text, with its defaults.
    new_job: fn(&str, JobOptions) -> jobqueue_core::Result<NewJob>,
}

/// `payload` decoded as `T`; a payload that does not decode fails its job
/// for good, naming the type.
fn decode<T: jobqueue_core::Job>(payload: &serde_json::Value) -> Result<T, JobError> {
    T::deserialize(payload).map_err(|e| {
        JobError::Fail(format!(
            "payload of job type `{}` does not decode as {}: {e}",
            T::JOB_TYPE,
            std::any::type_name::<T>()
        ))
    })
}

/// A value handlers share, with its type's name for messages.
#[derive(Clone)]
struct State {
    type_name: &'static str,
    value: Arc<dyn Any + Send + Sync>,
}

/// Handlers by job type, and the application state they share.
///
/// A runner claims every job of the queues it works; a job whose type has
/// no handler here is set aside as unhandled for a runner that has one.
///
/// State (an HTTP client, a connection pool, a configuration) is given once
/// with [`Registry::state`] and reached from any handler by its type with
/// [`JobContext::state`], so no handler needs a process-wide global.
#[derive(Clone, Default)]
pub struct Registry {
    handlers: HashMap<&'static str, Handler>,
    states: HashMap<TypeId, State>,
    /// Wrapped around every attempt, the first registered outermost.
    middleware: Vec<Arc<dyn Middleware>>,
    /// Told when a job fails for good, is cancelled, panics or overruns.
    lifecycle: Vec<Arc<dyn Lifecycle>>,
    schedules: Vec<Periodic>,
    queues: Vec<QueueConfig>,
    duplicates: Vec<String>,
}

impl std::fmt::Debug for Registry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut states: Vec<_> = self.states.values().map(|s| s.type_name).collect();
        states.sort_unstable();
        f.debug_struct("Registry")
            .field("job_types", &self.job_types())
            .field("states", &states)
            .field("middleware", &self.middleware.len())
            .field("lifecycle", &self.lifecycle.len())
            .finish()
    }
}

impl Registry {
    /// An empty registry.
    pub fn new() -> Self {
        Self::default()
    }

    /// Registers `T`'s handler under `T::JOB_TYPE`. A payload that does not
    /// decode as `T` fails its job permanently, naming the job type.
    pub fn register<T: Perform>(self) -> Self {
        let run = |payload: &serde_json::Value, ctx: &mut JobContext<'_>| -> Result<(), JobError> {
            decode::<T>(payload)?.perform(ctx)
        };
        self.add::<T>(Body::Thread(Arc::new(run)), T::TIMEOUT)
    }

    /// Registers `T`'s async handler under `T::JOB_TYPE`: its attempts run
    /// as tasks of the runner's tokio runtime (see [`crate::AsyncPerform`]).
    /// A payload that does not decode as `T` fails its job permanently, as
    /// with [`Registry::register`]. A registry may hold both kinds.
    #[cfg(feature = "async")]
    pub fn register_async<T: crate::AsyncPerform>(self) -> Self {
        fn run<'c, T: crate::AsyncPerform>(
            payload: &'c serde_json::Value,
            ctx: &'c mut JobContext<'_>,
        ) -> AttemptFuture<'c> {
            let job = decode::<T>(payload);
            Box::pin(async move { job?.perform(ctx).await })
        }
        let timeout = <T as crate::AsyncPerform>::TIMEOUT;
        self.add::<T>(Body::Async(Arc::new(run::<T>)), timeout)
    }

    /// Registers `T` under its type, worked by `body`.
    fn add<T: jobqueue_core::Job>(mut self, body: Body, timeout: Option<Duration>) -> Self {
        let handler = Handler {
            body,
            timeout,
            retry: T::RETRY_POLICY,
            new_job: NewJob::from_json::<T>,
        };
        if self.handlers.insert(T::JOB_TYPE, handler).is_some() {
            self.duplicates
                .push(format!("job type `{}` is registered twice", T::JOB_TYPE));
        }
        self
    }

    /// Whether any registered type has an async handler (the runner then
    /// needs a runtime).
    #[cfg(feature = "async")]
    pub(crate) fn has_async(&self) -> bool {
        self.handlers
            .values()
            .any(|handler| matches!(handler.body, Body::Async(_)))
    }

    /// Gives handlers `value`, shared by all of them (behind an [`Arc`]):
    /// a handler reaches it with `ctx.state::<S>()`. One value per type;
    /// wrap values of the same type in types of their own to give several.
    ///
    /// ```
    /// use std::sync::atomic::{AtomicU64, Ordering};
    /// use jobqueue_core::Job;
    /// use jobqueue_runner::{JobContext, JobError, Perform, Registry};
    /// use serde::{Deserialize, Serialize};
    ///
    /// /// The application's mail client, made once at start.
    /// struct Mailer { relay: String, sent: AtomicU64 }
    ///
    /// #[derive(Serialize, Deserialize, Job)]
    /// #[job(type = "email.send")]
    /// struct SendEmail { to: String }
    ///
    /// impl Perform for SendEmail {
    ///     fn perform(&self, ctx: &mut JobContext<'_>) -> Result<(), JobError> {
    ///         let mailer = ctx.state::<Mailer>()?;
    ///         mailer.sent.fetch_add(1, Ordering::Relaxed); // send through mailer.relay
    ///         Ok(())
    ///     }
    /// }
    ///
    /// let registry = Registry::new()
    ///     .state(Mailer { relay: "smtp.example.com".into(), sent: AtomicU64::new(0) })
    ///     .register::<SendEmail>();
    /// ```
    pub fn state<S: Send + Sync + 'static>(mut self, value: S) -> Self {
        let type_name = std::any::type_name::<S>();
        let state = State {
            type_name,
            value: Arc::new(value),
        };
        if self.states.insert(TypeId::of::<S>(), state).is_some() {
            self.duplicates
                .push(format!("state of type `{type_name}` is given twice"));
        }
        self
    }

    /// Wraps `middleware` around every attempt of every job this registry
    /// handles, inside the middleware registered before it: the first
    /// registered runs first and returns last. See [`Middleware`] for
    /// where the stack sits in an attempt.
    ///
    /// ```
    /// use jobqueue_runner::{JobContext, JobError, Middleware, Next, Registry};
    ///
    /// /// Turns every failure of the `billing` queue's jobs into one that is
    /// /// not retried: a charge is attempted once.
    /// struct ChargeOnce;
    ///
    /// impl Middleware for ChargeOnce {
    ///     fn around(&self, ctx: &mut JobContext<'_>, next: Next<'_>) -> Result<(), JobError> {
    ///         if ctx.queue() != "billing" {
    ///             return next.run(ctx);
    ///         }
    ///         next.run(ctx).map_err(|e| match e {
    ///             JobError::Retry(why) => JobError::Fail(why),
    ///             other => other,
    ///         })
    ///     }
    /// }
    ///
    /// let registry = Registry::new().middleware(ChargeOnce);
    /// ```
    pub fn middleware<M: Middleware>(mut self, middleware: M) -> Self {
        self.middleware.push(Arc::new(middleware));
        self
    }

    /// Calls `handler` when a job fails for good or a runner cancels it
    /// (in the transaction that writes it), when a handler panics, and
    /// when one runs past its timeout: see [`Lifecycle`] for when each
    /// method runs and how often. Several handlers are called in the
    /// order registered.
    pub fn lifecycle<L: Lifecycle>(mut self, handler: L) -> Self {
        self.lifecycle.push(Arc::new(handler));
        self
    }

    /// The lifecycle handlers, in the order registered.
    pub(crate) fn lifecycle_handlers(&self) -> &[Arc<dyn Lifecycle>] {
        &self.lifecycle
    }

    /// The middleware, outermost first.
    pub(crate) fn stack(&self) -> &[Arc<dyn Middleware>] {
        &self.middleware
    }

    /// Declares a periodic job: each slot of `schedule` enqueues its job,
    /// fired by whichever runner with this schedule gets there first, once
    /// per slot. Its job type must be registered here too. Checked when the
    /// runner starts (an invalid expression or time zone stops it there,
    /// naming the schedule).
    ///
    /// ```
    /// use jobqueue_core::{Job, Periodic};
    /// use jobqueue_runner::{JobContext, JobError, Perform, Registry};
    /// use serde::{Deserialize, Serialize};
    ///
    /// #[derive(Serialize, Deserialize, Job)]
    /// #[job(type = "digest.send", queue = "mail")]
    /// struct Digest {}
    ///
    /// impl Perform for Digest {
    ///     fn perform(&self, _ctx: &mut JobContext<'_>) -> Result<(), JobError> {
    ///         Ok(())
    ///     }
    /// }
    ///
    /// let registry = Registry::new()
    ///     .register::<Digest>()
    ///     .periodic(Periodic::new("nightly-digest", "0 3 * * *", &Digest {}).time_zone("Europe/Paris"));
    /// ```
    pub fn periodic(mut self, schedule: Periodic) -> Self {
        if self.schedules.iter().any(|s| s.name() == schedule.name()) {
            self.duplicates
                .push(format!("schedule `{}` is declared twice", schedule.name()));
        }
        self.schedules.push(schedule);
        self
    }

    /// The declared schedules.
    pub(crate) fn schedules(&self) -> &[Periodic] {
        &self.schedules
    }

    /// Declares a queue's settings in code (`QueueConfig`): a runner
    /// applies them at its start, each setting when its declaration
    /// changed (an operator's change since the last declaration stands;
    /// see [`jobqueue_core::declare_queue`]), and gives the queue the
    /// declared workers unless its own configuration names the queue's.
    pub fn queue(mut self, config: QueueConfig) -> Self {
        if self.queues.iter().any(|q| q.name() == config.name()) {
            self.duplicates
                .push(format!("queue `{}` is declared twice", config.name()));
        }
        self.queues.push(config);
        self
    }

    /// The queues declared with [`Registry::queue`] (a command line's
    /// `migrate` applies them too).
    pub fn declared_queues(&self) -> &[QueueConfig] {
        &self.queues
    }

    /// The registered job types, sorted.
    pub fn job_types(&self) -> Vec<&'static str> {
        let mut types: Vec<_> = self.handlers.keys().copied().collect();
        types.sort_unstable();
        types
    }

    /// A job of the registered type `job_type` from its payload as JSON
    /// text, with what the type declares (queue, priority, attempts, payload
    /// limit) for anything `options` leaves unset: how a command line or an
    /// HTTP endpoint enqueues by type name. The payload must decode as the
    /// type ([`jobqueue_core::Error::Deserialize`] otherwise); a type not
    /// registered here is [`jobqueue_core::Error::UnknownJobType`], which
    /// lists the registered ones.
    pub fn new_job(
        &self,
        job_type: &str,
        payload_json: &str,
        options: JobOptions,
    ) -> jobqueue_core::Result<NewJob> {
        match self.handlers.get(job_type) {
            Some(handler) => (handler.new_job)(payload_json, options),
            None => Err(jobqueue_core::Error::UnknownJobType {
                job_type: job_type.to_owned(),
                known: self.job_types().into_iter().map(str::to_owned).collect(),
            }),
        }
    }

    pub(crate) fn get(&self, job_type: &str) -> Option<&Handler> {
        self.handlers.get(job_type)
    }

    /// The state of type `S`, if given.
    pub(crate) fn get_state<S: Send + Sync + 'static>(&self) -> Option<Arc<S>> {
        let state = self.states.get(&TypeId::of::<S>())?;
        Arc::clone(&state.value).downcast::<S>().ok()
    }

    /// Checks that each job type was registered once, each state given
    /// once, and that every type is a valid name.
    pub(crate) fn validate(&self) -> Result<(), crate::RunnerError> {
        if let Some(dup) = self.duplicates.first() {
            return Err(crate::RunnerError::Config(dup.clone()));
        }
        if self.handlers.is_empty() {
            return Err(crate::RunnerError::Config(
                "no job types registered: the runner would never work anything; \
                 register handlers with `Registry::register::<T>()`"
                    .into(),
            ));
        }
        for queue in &self.queues {
            queue
                .validate()
                .map_err(|e| crate::RunnerError::Config(e.to_string()))?;
        }
        for schedule in &self.schedules {
            schedule
                .validate()
                .map_err(|e| crate::RunnerError::Config(e.to_string()))?;
            if let Some(job_type) = schedule.job_type()
                && !self.handlers.contains_key(job_type)
            {
                return Err(crate::RunnerError::Config(format!(
                    "schedule `{}` enqueues job type `{job_type}`, which this runner does not \
                     register: register it too",
                    schedule.name()
                )));
            }
        }
        for (job_type, handler) in &self.handlers {
            jobqueue_core::limits::check_job_type(job_type)?;
            if let Some(policy) = &handler.retry {
                policy.validate().map_err(|e| {
                    crate::RunnerError::Config(format!("job type `{job_type}`: {e}"))
                })?;
            }
        }
        Ok(())
    }
}

// The handler trait: how a job type is worked.

/// A job type the runner can work.
///
/// ```
/// use jobqueue_core::Job;
/// use jobqueue_runner::{JobContext, JobError, Perform};
/// use serde::{Deserialize, Serialize};
///
/// #[derive(Serialize, Deserialize)]
/// struct SendEmail { to: String }
///
/// impl Job for SendEmail {
///     const JOB_TYPE: &'static str = "email.send";
/// }
///
/// impl Perform for SendEmail {
///     fn perform(&self, ctx: &mut JobContext<'_>) -> Result<(), JobError> {
///         ctx.progress(50, "rendering")?;
///         if self.to.is_empty() {
///             return Err(JobError::fail("no recipient"));
///         }
///         Ok(())
///     }
/// }
/// ```
pub trait Perform: Job + Send + 'static {
    /// How long an attempt may run before it is flagged as timed out
    /// ([`JobContext::is_timed_out`]); after one more lease period the
    /// runner stops renewing its lease so another runner can recover it.
    /// Default: the runner's `default_timeout` (none unless configured).
    const TIMEOUT: Option<Duration> = None;

    /// Works one attempt of the job.
    fn perform(&self, ctx: &mut JobContext<'_>) -> Result<(), JobError>;
}

/// A job type whose handler is an `async fn`: it runs as a task on the
/// runner's tokio runtime and holds no worker thread while it awaits (the
/// `async` feature). Registered with [`Registry::register_async`].
///
/// An attempt has what a thread handler's has: the same [`JobContext`],
/// outcomes, retries, middleware and concurrency limits. Three things
/// differ, because a future can be dropped where a thread cannot be
/// stopped:
///
/// - past its timeout ([`AsyncPerform::TIMEOUT`], else the runner's
///   `default_timeout`) the future is dropped at its next await and the
///   attempt fails as retryable, naming the timeout;
/// - a cancel request drops it the same way (the job ends cancelled), and
///   so does a lost lease (nothing is written);
/// - a panic is caught as a thread handler's is.
///
/// The context's database calls ([`JobContext::conn`], progress, steps)
/// are blocking round trips on the task's runtime thread: keep them short,
/// or give the application's own `diesel-async` pool with
/// [`Registry::state`] for long queries.
///
/// ```
/// use std::time::Duration;
/// use jobqueue_core::Job;
/// use jobqueue_runner::{AsyncPerform, JobContext, JobError, Registry};
/// use serde::{Deserialize, Serialize};
///
/// #[derive(Serialize, Deserialize, Job)]
/// #[job(type = "webhook.deliver")]
/// struct Deliver { url: String }
///
/// impl AsyncPerform for Deliver {
///     const TIMEOUT: Option<Duration> = Some(Duration::from_secs(30));
///
///     async fn perform(&self, ctx: &mut JobContext<'_>) -> Result<(), JobError> {
///         // An async HTTP client's call would be awaited here.
///         tokio::time::sleep(Duration::from_millis(10)).await;
///         ctx.progress(100, "delivered")
///     }
/// }
///
/// let registry = Registry::new().register_async::<Deliver>();
/// ```
///
/// [`Registry::register_async`]: crate::Registry::register_async
/// [`Registry::state`]: crate::Registry::state
#[cfg(feature = "async")]
pub trait AsyncPerform: Job + Send + Sync + 'static {
    /// How long an attempt may run: its future is dropped past this.
    /// Default: the runner's `default_timeout` (none unless configured).
    const TIMEOUT: Option<Duration> = None;

    /// Works one attempt of the job.
    fn perform(
        &self,
        ctx: &mut JobContext<'_>,
    ) -> impl std::future::Future<Output = Result<(), JobError>> + Send;
}
