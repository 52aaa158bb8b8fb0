//! Batches: a set of jobs with callback jobs enqueued with them, one run
//! when every member completed, one when every member ended however.

use diesel::PgConnection;

use crate::{EnqueuedWorkflow, Job, JobOptions, NewJob, Result, Step, Workflow};

/// The step name of a batch's success callback.
pub const ON_SUCCESS: &str = "on_success";

/// The step name of a batch's finish callback.
pub const ON_FINISH: &str = "on_finish";

/// A set of jobs enqueued at once, with callback jobs enqueued in the same
/// statement: [`on_success`](Batch::on_success) becomes due when every
/// member completed (and is cancelled if one fails for good or is
/// cancelled), [`on_finish`](Batch::on_finish) when every member ended,
/// however. A callback is a job like any other, inserted once with the
/// batch: it exists exactly once whatever crashes happen, and runs as any
/// job does (a handler that must have its effect once writes it with
/// `complete_in_transaction`).
///
/// A batch is a workflow (`jobqueue workflow show ID`); its members are
/// steps `0`, `1`, ... in the order added.
///
/// ```no_run
/// use jobqueue_core::{Batch, Job};
/// use serde::{Deserialize, Serialize};
///
/// #[derive(Serialize, Deserialize, Job)]
/// #[job(type = "import.row")]
/// struct ImportRow { row: u32 }
///
/// #[derive(Serialize, Deserialize, Job)]
/// #[job(type = "import.report")]
/// struct Report { file: String }
///
/// # fn run(conn: &mut diesel::PgConnection) -> jobqueue_core::Result<()> {
/// let mut batch = Batch::new("import rows.csv")?;
/// for row in 0..10_000 {
///     batch.add(&ImportRow { row })?;
/// }
/// batch.on_finish(&Report { file: "rows.csv".into() })?;
/// batch.enqueue(conn)?;
/// # Ok(())
/// # }
/// ```
#[derive(Debug)]
pub struct Batch {
    flow: Workflow,
    members: Vec<Step>,
    on_success: Option<NewJob>,
    on_finish: Option<NewJob>,
}

impl Batch {
    /// An empty batch named `name` (1 to 200 bytes).
    pub fn new(name: impl Into<String>) -> Result<Self> {
        Ok(Batch {
            flow: Workflow::new(name)?,
            members: Vec::new(),
            on_success: None,
            on_finish: None,
        })
    }

    /// The id the batch will have once enqueued (a workflow's id).
    pub fn id(&self) -> crate::JobId {
        self.flow.id()
    }

    /// Adds `job` as a member, with its type's defaults.
    pub fn add<J: Job>(&mut self, job: &J) -> Result<Step> {
        self.add_job(NewJob::from_job(job, JobOptions::new())?)
    }

    /// Adds `job` (built with options) as a member.
    pub fn add_job(&mut self, job: NewJob) -> Result<Step> {
        let step = self.flow.add_job(self.members.len().to_string(), job)?;
        self.members.push(step);
        Ok(step)
    }

    /// The job to run once every member completed (replacing an earlier
    /// one); cancelled if a member fails for good or is cancelled.
    pub fn on_success<J: Job>(&mut self, job: &J) -> Result<&mut Self> {
        self.on_success = Some(NewJob::from_job(job, JobOptions::new())?);
        Ok(self)
    }

    /// The job to run once every member ended, completed or not
    /// (replacing an earlier one).
    pub fn on_finish<J: Job>(&mut self, job: &J) -> Result<&mut Self> {
        self.on_finish = Some(NewJob::from_job(job, JobOptions::new())?);
        Ok(self)
    }

    /// Inserts the members and the callbacks in one statement on `conn`,
    /// inside the caller's transaction if any. The callbacks are steps
    /// [`ON_SUCCESS`] and [`ON_FINISH`] of the enqueued workflow.
    pub fn enqueue(self, conn: &mut PgConnection) -> Result<EnqueuedWorkflow> {
        self.into_workflow()?.enqueue(conn)
    }

    /// [`enqueue`](Self::enqueue) on diesel-async's `AsyncPgConnection`
    /// (feature `async`).
    #[cfg(feature = "async")]
    pub async fn enqueue_async(
        self,
        conn: &mut diesel_async::AsyncPgConnection,
    ) -> Result<EnqueuedWorkflow> {
        self.into_workflow()?.enqueue_async(conn).await
    }

    /// The workflow of its members and callbacks.
    fn into_workflow(self) -> Result<Workflow> {
        let Batch {
            mut flow,
            members,
            on_success,
            on_finish,
        } = self;
        if let Some(job) = on_success {
            let callback = flow.add_job(ON_SUCCESS, job)?;
            flow.after(callback, members.iter().copied())?;
        }
        if let Some(job) = on_finish {
            let callback = flow.add_job(ON_FINISH, job)?;
            flow.after_finished(callback, members.iter().copied())?;
        }
        Ok(flow)
    }
}
