//! Workflows: a graph of jobs enqueued at once, each step waiting for the
//! steps it comes after (see the `workflows` migration for how a step is
//! released, and `workflow_release.rs` for the runner's side).

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicU64, Ordering};

use diesel::pg::Pg;
use diesel::prelude::*;
use diesel::query_builder::{BoxedSqlQuery, SqlQuery};
use diesel::sql_types::{Array, BigInt, Float8, Integer, Nullable, Text, Timestamptz, Uuid};

use crate::trace_context::EnqueueTrace;
use crate::{Error, Job, JobId, JobOptions, NewJob, Result, sql};

/// Most steps in one workflow.
pub const MAX_WORKFLOW_STEPS: usize = 100_000;

/// Longest name of a workflow or of a step, in bytes.
pub const MAX_WORKFLOW_NAME: usize = 200;

/// What happens to the steps after a step that failed for good or was
/// cancelled (a workflow's choice, [`Workflow::on_failure`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum OnFailure {
    /// They are cancelled, and the steps after them, down the graph (the
    /// default).
    #[default]
    Cancel,
    /// They run anyway: the failed or cancelled step counts as done.
    Run,
    /// They wait: a retry of the failed step (`jobqueue retry ID`) that
    /// completes releases them.
    Wait,
}

impl OnFailure {
    /// The name stored in the database.
    pub fn as_str(self) -> &'static str {
        match self {
            OnFailure::Cancel => "cancel",
            OnFailure::Run => "run",
            OnFailure::Wait => "wait",
        }
    }
}

/// Tells one builder's steps from another's.
static BUILDERS: AtomicU64 = AtomicU64::new(1);

/// A step of a [`Workflow`] being built: what [`Workflow::after`] names.
/// It belongs to the builder that returned it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Step {
    builder: u64,
    index: usize,
    id: JobId,
}

impl Step {
    /// The id its job will have once the workflow is enqueued.
    pub fn id(&self) -> JobId {
        self.id
    }
}

/// How an edge settles.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum EdgeKind {
    /// When the parent completes (or as the workflow's [`OnFailure`] says).
    Completed,
    /// However the parent ends.
    Finished,
}

impl EdgeKind {
    fn as_str(self) -> &'static str {
        match self {
            EdgeKind::Completed => "completed",
            EdgeKind::Finished => "finished",
        }
    }
}

/// A graph of jobs to enqueue at once: each step is a job, and a step
/// added [`after`](Workflow::after) others becomes due only when each of
/// them completed. [`enqueue`](Workflow::enqueue) inserts every step in the
/// caller's transaction, or none.
///
/// A step records a small result for the steps after it
/// (`JobContext::set_result` in the runner); they read their parents'
/// results through their context. What a failed step does to the steps
/// after it is the workflow's [`OnFailure`].
///
/// ```no_run
/// use jobqueue_core::{Job, Workflow};
/// use serde::{Deserialize, Serialize};
///
/// #[derive(Serialize, Deserialize, Job)]
/// #[job(type = "video.transcode")]
/// struct Transcode { video: u64 }
///
/// #[derive(Serialize, Deserialize, Job)]
/// #[job(type = "video.thumbnails")]
/// struct Thumbnails { video: u64 }
///
/// #[derive(Serialize, Deserialize, Job)]
/// #[job(type = "video.publish")]
/// struct Publish { video: u64 }
///
/// # fn run(conn: &mut diesel::PgConnection) -> jobqueue_core::Result<()> {
/// let mut flow = Workflow::new("publish video 7")?;
/// let transcode = flow.add("transcode", &Transcode { video: 7 })?;
/// let thumbnails = flow.add("thumbnails", &Thumbnails { video: 7 })?;
/// let publish = flow.add("publish", &Publish { video: 7 })?;
/// flow.after(thumbnails, [transcode])?;
/// flow.after(publish, [transcode, thumbnails])?;
/// let enqueued = flow.enqueue(conn)?;
/// println!("workflow {}", enqueued.id);
/// # Ok(())
/// # }
/// ```
#[derive(Debug)]
pub struct Workflow {
    builder: u64,
    id: JobId,
    name: String,
    on_failure: OnFailure,
    steps: Vec<(String, NewJob)>,
    names: HashMap<String, usize>,
    /// `(parent, child, kind)` by step index.
    edges: Vec<(usize, usize, EdgeKind)>,
    /// `(parent, child)` of each edge: a second edge between them is
    /// dropped (the first one's kind holds).
    joined: HashSet<(usize, usize)>,
}

/// A workflow enqueued: its id and each step's job id, in the order they
/// were added.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct EnqueuedWorkflow {
    /// The workflow's id (`jobqueue workflow show ID`).
    pub id: JobId,
    /// Each step's name and job id.
    pub steps: Vec<(String, JobId)>,
}

impl Workflow {
    /// An empty workflow named `name` (1 to 200 bytes; shown by
    /// `jobqueue workflow show` and the dashboard), whose failed steps
    /// cancel the steps after them.
    pub fn new(name: impl Into<String>) -> Result<Self> {
        let name = name.into();
        check_name("workflow name", &name)?;
        Ok(Workflow {
            builder: BUILDERS.fetch_add(1, Ordering::Relaxed),
            id: JobId::new(),
            name,
            on_failure: OnFailure::default(),
            steps: Vec::new(),
            names: HashMap::new(),
            edges: Vec::new(),
            joined: HashSet::new(),
        })
    }

    /// What a step that failed for good or was cancelled does to the steps
    /// after it.
    pub fn on_failure(&mut self, on_failure: OnFailure) -> &mut Self {
        self.on_failure = on_failure;
        self
    }

    /// The id the workflow will have once enqueued.
    pub fn id(&self) -> JobId {
        self.id
    }

    /// Adds `job` as the step `name` (unique in the workflow), with its
    /// type's defaults.
    pub fn add<J: Job>(&mut self, name: impl Into<String>, job: &J) -> Result<Step> {
        self.add_job(name, NewJob::from_job(job, JobOptions::new())?)
    }

    /// Adds `job` (built with options: `job.options().queue(..).build()`)
    /// as the step `name` (unique in the workflow). A step may not carry a
    /// unique key: a duplicate would leave a hole in the graph.
    pub fn add_job(&mut self, name: impl Into<String>, job: NewJob) -> Result<Step> {
        let name = name.into();
        check_name("step name", &name)?;
        if self.names.contains_key(&name) {
            return Err(self.invalid(format!(
                "two steps are named `{name}`; give each step its own name"
            )));
        }
        if job.unique_key.is_some() {
            return Err(self.invalid(format!(
                "step `{name}` has a unique key; a workflow's steps cannot have one \
                 (a duplicate would be left out of the graph): drop the key"
            )));
        }
        if self.steps.len() >= MAX_WORKFLOW_STEPS {
            return Err(self.invalid(format!(
                "more than {MAX_WORKFLOW_STEPS} steps; split the work into several workflows"
            )));
        }
        let index = self.steps.len();
        let step = Step {
            builder: self.builder,
            index,
            id: job.id,
        };
        self.names.insert(name.clone(), index);
        self.steps.push((name, job));
        Ok(step)
    }

    /// Makes `child` wait until each of `parents` completed (or, when one
    /// fails for good or is cancelled, as [`Workflow::on_failure`] says).
    /// Every step must be one of this workflow's.
    pub fn after(
        &mut self,
        child: Step,
        parents: impl IntoIterator<Item = Step>,
    ) -> Result<&mut Self> {
        self.edges_to(child, parents, EdgeKind::Completed)
    }

    /// Makes `child` wait until each of `parents` ended, however: completed,
    /// failed for good or cancelled (a batch's "when all finished").
    pub fn after_finished(
        &mut self,
        child: Step,
        parents: impl IntoIterator<Item = Step>,
    ) -> Result<&mut Self> {
        self.edges_to(child, parents, EdgeKind::Finished)
    }

    fn edges_to(
        &mut self,
        child: Step,
        parents: impl IntoIterator<Item = Step>,
        kind: EdgeKind,
    ) -> Result<&mut Self> {
        self.check_own(child)?;
        for parent in parents {
            self.check_own(parent)?;
            if parent.index == child.index {
                return Err(self.invalid(format!(
                    "step `{}` cannot come after itself",
                    self.steps[child.index].0
                )));
            }
            if self.joined.insert((parent.index, child.index)) {
                self.edges.push((parent.index, child.index, kind));
            }
        }
        Ok(self)
    }

    fn check_own(&self, step: Step) -> Result<()> {
        if step.builder == self.builder {
            Ok(())
        } else {
            Err(self.invalid(format!(
                "step {} belongs to another workflow; an edge may join only steps added \
                 to this one",
                step.id
            )))
        }
    }

    fn invalid(&self, reason: String) -> Error {
        Error::InvalidWorkflow {
            workflow: self.name.clone(),
            reason,
        }
    }

    /// The steps in a cycle, if the edges make one.
    fn cycle(&self) -> Option<Vec<&str>> {
        let n = self.steps.len();
        let mut parents_left = vec![0usize; n];
        let mut children = vec![Vec::new(); n];
        for &(parent, child, _) in &self.edges {
            parents_left[child] += 1;
            children[parent].push(child);
        }
        let mut ready: Vec<usize> = (0..n).filter(|&i| parents_left[i] == 0).collect();
        let mut seen = 0;
        while let Some(step) = ready.pop() {
            seen += 1;
            for &child in &children[step] {
                parents_left[child] -= 1;
                if parents_left[child] == 0 {
                    ready.push(child);
                }
            }
        }
        if seen == n {
            return None;
        }
        // What is left holds a cycle; walk back from one of its steps
        // along parents that are left too until a step repeats.
        let left: Vec<bool> = parents_left.iter().map(|&p| p > 0).collect();
        let mut parent_of = vec![None; n];
        for &(parent, child, _) in &self.edges {
            if left[parent] && left[child] {
                parent_of[child] = Some(parent);
            }
        }
        let start = left.iter().position(|&l| l)?;
        let mut path = vec![start];
        let mut at = start;
        while let Some(parent) = parent_of[at] {
            if let Some(from) = path.iter().position(|&s| s == parent) {
                let mut cycle: Vec<&str> = path[from..]
                    .iter()
                    .rev()
                    .map(|&s| self.steps[s].0.as_str())
                    .collect();
                cycle.push(cycle[0]);
                return Some(cycle);
            }
            path.push(parent);
            at = parent;
        }
        None
    }

    /// Inserts the workflow, its steps, edges and jobs in one statement on
    /// `conn` (inside the caller's transaction, if any): all of them or
    /// none. Steps without parents are due as any job; the others wait.
    /// Refuses an empty workflow and edges that make a cycle.
    pub fn enqueue(self, conn: &mut PgConnection) -> Result<EnqueuedWorkflow> {
        self.check()?;
        let this = self.hooked()?;
        let trace = EnqueueTrace::start(&this.steps[0].1, this.steps.len());
        let inserted = trace.in_scope(|| {
            this.insert_query(trace.traceparent.as_deref())
                .get_result::<Count>(conn)
        })?;
        Ok(this.enqueued(inserted))
    }

    /// [`enqueue`](Self::enqueue) on diesel-async's `AsyncPgConnection`
    /// (feature `async`), inside the caller's transaction if one is open.
    #[cfg(feature = "async")]
    pub async fn enqueue_async(
        self,
        conn: &mut diesel_async::AsyncPgConnection,
    ) -> Result<EnqueuedWorkflow> {
        self.check()?;
        let this = self.hooked()?;
        let trace = EnqueueTrace::start(&this.steps[0].1, this.steps.len());
        let insert = this.insert_query(trace.traceparent.as_deref());
        let insert = diesel_async::RunQueryDsl::get_result::<Count>(insert, conn);
        #[cfg(feature = "tracing")]
        let insert = tracing::Instrument::instrument(insert, trace.span());
        let inserted = insert.await?;
        Ok(this.enqueued(inserted))
    }

    /// The workflow with each step's job as the enqueue hooks leave it
    /// ([`crate::EnqueueHook`]): the same jobs when there are none.
    fn hooked(mut self) -> Result<Self> {
        for (_, job) in &mut self.steps {
            let changed = match crate::enqueue_hooks::applied(job)? {
                std::borrow::Cow::Owned(changed) => Some(changed),
                std::borrow::Cow::Borrowed(_) => None,
            };
            if let Some(changed) = changed {
                *job = changed;
            }
        }
        Ok(self)
    }

    /// Refuses an empty workflow and a cycle.
    fn check(&self) -> Result<()> {
        if self.steps.is_empty() {
            return Err(self.invalid("it has no steps; add one with `Workflow::add`".into()));
        }
        if let Some(cycle) = self.cycle() {
            return Err(self.invalid(format!(
                "its edges make a cycle ({}); a step cannot wait for itself, even through \
                 others",
                cycle.join(" -> ")
            )));
        }
        Ok(())
    }

    /// The statement that inserts it all ([`sql::WORKFLOW_INSERT`]), bound.
    fn insert_query(&self, traceparent: Option<&str>) -> BoxedSqlQuery<'static, Pg, SqlQuery> {
        let mut parents = vec![0i32; self.steps.len()];
        for &(_, child, _) in &self.edges {
            parents[child] += 1;
        }
        let jobs: Vec<&NewJob> = self.steps.iter().map(|(_, job)| job).collect();
        let strings = |f: &dyn Fn(&NewJob) -> &str| -> Vec<String> {
            jobs.iter().map(|job| f(job).to_owned()).collect()
        };
        let step_id = |i: usize| self.steps[i].1.id;
        diesel::sql_query(sql::WORKFLOW_INSERT)
            .into_boxed()
            .bind::<Uuid, _>(self.id)
            .bind::<Text, _>(self.name.clone())
            .bind::<Text, _>(self.on_failure.as_str())
            .bind::<Array<Uuid>, _>(jobs.iter().map(|job| job.id).collect::<Vec<_>>())
            .bind::<Array<Text>, _>(
                self.steps
                    .iter()
                    .map(|(name, _)| name.clone())
                    .collect::<Vec<_>>(),
            )
            .bind::<Array<Text>, _>(strings(&|job| &job.job_type))
            .bind::<Array<Text>, _>(strings(&|job| &job.queue))
            .bind::<Array<Integer>, _>(jobs.iter().map(|job| job.priority).collect::<Vec<_>>())
            .bind::<Array<Text>, _>(strings(&|job| &job.payload))
            .bind::<Array<Integer>, _>(jobs.iter().map(|job| job.max_attempts).collect::<Vec<_>>())
            .bind::<Array<Nullable<Timestamptz>>, _>(
                jobs.iter().map(|job| job.run_at).collect::<Vec<_>>(),
            )
            .bind::<Array<Float8>, _>(jobs.iter().map(|job| job.delay_secs).collect::<Vec<_>>())
            .bind::<Array<Nullable<Text>>, _>(
                jobs.iter()
                    .map(|job| job.concurrency_key.clone())
                    .collect::<Vec<_>>(),
            )
            .bind::<Array<Integer>, _>(parents)
            .bind::<Array<Uuid>, _>(
                self.edges
                    .iter()
                    .map(|&(p, _, _)| step_id(p))
                    .collect::<Vec<_>>(),
            )
            .bind::<Array<Uuid>, _>(
                self.edges
                    .iter()
                    .map(|&(_, c, _)| step_id(c))
                    .collect::<Vec<_>>(),
            )
            .bind::<Array<Text>, _>(
                self.edges
                    .iter()
                    .map(|&(_, _, kind)| kind.as_str())
                    .collect::<Vec<_>>(),
            )
            .bind::<Nullable<Text>, _>(traceparent.map(str::to_owned))
            .bind::<Text, _>(crate::enqueue::NOTIFY_CHANNEL)
            .bind::<Array<Nullable<Text>>, _>(
                jobs.iter()
                    .map(|job| job.tags_literal())
                    .collect::<Vec<_>>(),
            )
            .bind::<Array<Nullable<Text>>, _>(
                jobs.iter()
                    .map(|job| job.metadata.clone())
                    .collect::<Vec<_>>(),
            )
    }

    /// What [`enqueue`](Self::enqueue) returns once the statement
    /// inserted its jobs.
    fn enqueued(self, inserted: Count) -> EnqueuedWorkflow {
        debug_assert_eq!(inserted.n as usize, self.steps.len());
        EnqueuedWorkflow {
            id: self.id,
            steps: self
                .steps
                .into_iter()
                .map(|(name, job)| (name, job.id))
                .collect(),
        }
    }
}

/// The jobs the insert made: every step's, or none.
#[derive(QueryableByName)]
struct Count {
    #[diesel(sql_type = BigInt)]
    n: i64,
}

fn check_name(what: &'static str, name: &str) -> Result<()> {
    if name.is_empty() || name.len() > MAX_WORKFLOW_NAME {
        return Err(Error::invalid(
            what,
            format!(
                "`{name}` is {} bytes long; give 1 to {MAX_WORKFLOW_NAME}",
                name.len()
            ),
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(serde::Serialize, serde::Deserialize)]
    struct Step0;
    impl Job for Step0 {
        const JOB_TYPE: &'static str = "wf.step";
    }

    fn flow(steps: usize) -> (Workflow, Vec<Step>) {
        let mut flow = Workflow::new("test").expect("name");
        let steps = (0..steps)
            .map(|i| flow.add(format!("s{i}"), &Step0).expect("step"))
            .collect();
        (flow, steps)
    }

    #[test]
    fn a_cycle_is_named_step_by_step() {
        let (mut flow, s) = flow(4);
        flow.after(s[1], [s[0]]).expect("edge");
        flow.after(s[2], [s[1]]).expect("edge");
        flow.after(s[3], [s[2]]).expect("edge");
        flow.after(s[1], [s[3]]).expect("edge");
        let cycle = flow.cycle().expect("a cycle");
        assert_eq!(cycle.first(), cycle.last());
        let mut inner = cycle[..cycle.len() - 1].to_vec();
        inner.sort_unstable();
        assert_eq!(inner, ["s1", "s2", "s3"]);
    }

    #[test]
    fn a_diamond_has_no_cycle() {
        let (mut flow, s) = flow(4);
        flow.after(s[1], [s[0]]).expect("edge");
        flow.after(s[2], [s[0]]).expect("edge");
        flow.after(s[3], [s[1], s[2]]).expect("edge");
        assert_eq!(flow.cycle(), None);
    }

    #[test]
    fn steps_of_another_builder_and_loops_are_refused() {
        let (mut one, a) = flow(2);
        let (_, b) = flow(1);
        let err = one.after(a[0], [b[0]]).expect_err("foreign step");
        assert!(err.to_string().contains("another workflow"), "{err}");
        let err = one.after(a[1], [a[1]]).expect_err("loop");
        assert!(err.to_string().contains("after itself"), "{err}");
        let err = one.add("s0", &Step0).expect_err("duplicate name");
        assert!(
            err.to_string().contains("two steps are named `s0`"),
            "{err}"
        );
    }
}
