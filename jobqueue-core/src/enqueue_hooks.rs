//! Enqueue hooks: code an application runs on every job it enqueues,
//! before the insert, on every path that inserts from Rust (one job,
//! batches and `COPY`, diesel-async, workflows, `jobqueue enqueue`).
//!
//! A hook sees the job about to be inserted and may stamp metadata, add
//! tags, move it to another queue, change its priority or rewrite its
//! payload (encrypt a field, say), each change checked as the job's
//! options are; or refuse it, and the enqueue returns
//! [`Error::Refused`] with the hook's reason, having inserted nothing of
//! its batch. Hooks are installed once per process
//! ([`add_enqueue_hook`]), as an application sets up its logger, and run
//! in the order they were added, on the enqueuing thread, inside the
//! caller's transaction (they get no connection: what they stamp comes
//! from the application's own context, a request's user say).
//!
//! A process without hooks pays one atomic load per enqueue: the jobs are
//! inserted as given, not copied.

use std::borrow::Cow;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, RwLock};

use crate::{Error, NewJob, Result};

/// Code run on every job before it is inserted: see the module's
/// documentation.
///
/// ```
/// use jobqueue_core::{EnqueueHook, NewJob};
///
/// /// Stamps the user the current request runs as.
/// struct StampUser;
///
/// impl EnqueueHook for StampUser {
///     fn before_insert(&self, job: &mut NewJob) -> Result<(), String> {
///         job.set_meta("enqueued_by", "user:42").map_err(|e| e.to_string())
///     }
/// }
/// ```
pub trait EnqueueHook: Send + Sync + 'static {
    /// Called with each job about to be inserted. An `Err` refuses it: the
    /// enqueue returns [`Error::Refused`] with this reason, and inserts
    /// nothing of the batch the job was in.
    fn before_insert(&self, job: &mut NewJob) -> std::result::Result<(), String>;
}

/// Whether any hook was added: the only thing an enqueue reads when none
/// was.
static ANY: AtomicBool = AtomicBool::new(false);

/// The hooks, in the order they were added.
static HOOKS: RwLock<Vec<Arc<dyn EnqueueHook>>> = RwLock::new(Vec::new());

/// Adds `hook` to the hooks every enqueue of this process runs, after
/// those added before it. There is no removal: hooks are part of how the
/// application is set up, as its logger is.
pub fn add_enqueue_hook(hook: impl EnqueueHook) {
    // A hook that panicked while the list was being read poisons nothing
    // the list holds: the list is read and appended to whole.
    let mut hooks = HOOKS
        .write()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    hooks.push(Arc::new(hook));
    ANY.store(true, Ordering::Release);
}

/// The hooks added so far (none: an empty list, without a lock).
fn hooks() -> Vec<Arc<dyn EnqueueHook>> {
    if !ANY.load(Ordering::Acquire) {
        return Vec::new();
    }
    HOOKS
        .read()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
        .clone()
}

/// `job` as the hooks leave it: borrowed as given when there are none.
pub(crate) fn applied(job: &NewJob) -> Result<Cow<'_, NewJob>> {
    let hooks = hooks();
    if hooks.is_empty() {
        return Ok(Cow::Borrowed(job));
    }
    let mut job = job.clone();
    run(&hooks, &mut job)?;
    Ok(Cow::Owned(job))
}

/// `jobs` as the hooks leave them: borrowed as given when there are none.
pub(crate) fn applied_many(jobs: &[NewJob]) -> Result<Cow<'_, [NewJob]>> {
    let hooks = hooks();
    if hooks.is_empty() {
        return Ok(Cow::Borrowed(jobs));
    }
    let mut jobs = jobs.to_vec();
    for job in &mut jobs {
        run(&hooks, job)?;
    }
    Ok(Cow::Owned(jobs))
}

/// `job` as the hooks leave it, as an enqueue would insert it: what the
/// testing kit's `perform` hands the handler's stack, which never inserts.
pub fn hooked(mut job: NewJob) -> Result<NewJob> {
    run(&hooks(), &mut job)?;
    Ok(job)
}

/// Runs each of `hooks` on `job` in turn, stopping at the first refusal.
fn run(hooks: &[Arc<dyn EnqueueHook>], job: &mut NewJob) -> Result<()> {
    for hook in hooks {
        hook.before_insert(job).map_err(|reason| Error::Refused {
            job_type: job.job_type.clone(),
            reason,
        })?;
    }
    Ok(())
}
