//! The handlers a runner knows, by job type.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use crate::{JobContext, JobError, Perform};

type HandlerFn =
    dyn Fn(&serde_json::Value, &mut JobContext<'_>) -> Result<(), JobError> + Send + Sync;

/// One registered job type.
#[derive(Clone)]
pub(crate) struct Handler {
    pub(crate) run: Arc<HandlerFn>,
    pub(crate) timeout: Option<Duration>,
}

/// Handlers by job type. The runner claims only job types registered here;
/// jobs of other types stay pending for runners that know them.
#[derive(Clone, Default)]
pub struct Registry {
    handlers: HashMap<&'static str, Handler>,
    duplicates: Vec<&'static str>,
}

impl std::fmt::Debug for Registry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Registry")
            .field("job_types", &self.job_types())
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
    pub fn register<T: Perform>(mut self) -> Self {
        let run = |payload: &serde_json::Value, ctx: &mut JobContext<'_>| -> Result<(), JobError> {
            let job = T::deserialize(payload).map_err(|e| {
                JobError::Permanent(format!(
                    "payload of job type `{}` does not decode as {}: {e}",
                    T::JOB_TYPE,
                    std::any::type_name::<T>()
                ))
            })?;
            job.perform(ctx)
        };
        let handler = Handler {
            run: Arc::new(run),
            timeout: T::TIMEOUT,
        };
        if self.handlers.insert(T::JOB_TYPE, handler).is_some() {
            self.duplicates.push(T::JOB_TYPE);
        }
        self
    }

    /// The registered job types, sorted.
    pub fn job_types(&self) -> Vec<&'static str> {
        let mut types: Vec<_> = self.handlers.keys().copied().collect();
        types.sort_unstable();
        types
    }

    pub(crate) fn get(&self, job_type: &str) -> Option<&Handler> {
        self.handlers.get(job_type)
    }

    /// Checks that each job type was registered once and is a valid name.
    pub(crate) fn validate(&self) -> Result<(), crate::RunnerError> {
        if let Some(dup) = self.duplicates.first() {
            return Err(crate::RunnerError::Config(format!(
                "job type `{dup}` is registered twice"
            )));
        }
        if self.handlers.is_empty() {
            return Err(crate::RunnerError::Config(
                "no job types registered: the runner would never claim anything".into(),
            ));
        }
        for job_type in self.handlers.keys() {
            jobqueue_core::limits::check_job_type(job_type)?;
        }
        Ok(())
    }
}
