//! What the planner does with the hot-path statements, for tests and
//! diagnostics: one statement run under `EXPLAIN ANALYZE` on a queue
//! session, rolled back, and summed up by the reads of the jobs table.

use std::time::Duration;

use diesel::connection::{AnsiTransactionManager, TransactionManager};
use diesel::prelude::*;
use diesel::sql_types::Text;

use crate::admission::{QueueKey, admit_query, mark_checked_query, new_query, with_waiting_query};
use crate::claim::{Claim, GlobalLimits, query};
use crate::finish::fenced_query;
use crate::finish::{Failure, fail_query, park_query};
use crate::heartbeat::{Beat, heartbeat_query};
use crate::lease::Lease;
use crate::prepared::{EXPLAIN_ANALYZE, ExplainAnalyze, Prepared, Statement};
use crate::prune::prune_query;
use crate::rescue::rescue_query;
use crate::workflow_release::{StepDone, steps_query};
use crate::{JobId, JobStatus, Result, sql};

/// A statement the runners run on every batch (the hot path) or on every
/// maintenance pass, with the values it would run with.
#[derive(Debug, Clone, Copy)]
#[non_exhaustive]
pub enum HotStatement<'a> {
    /// The claim: the statement that honours global and rate limits, or
    /// the one that leaves limited queues out, as its `global_limits` says.
    Claim(&'a Claim),
    /// Marking held jobs as running.
    Start(&'a [Lease]),
    /// Completing held jobs.
    Complete(&'a [Lease]),
    /// Completing held jobs by deleting them (a retention of zero for
    /// completed jobs).
    CompleteAndDelete(&'a [Lease]),
    /// Recording failed attempts.
    Fail(&'a [Failure]),
    /// Renewing leases, for this long.
    Heartbeat(&'a [Lease], Duration),
    /// Handing held jobs back unstarted.
    Release(&'a [Lease]),
    /// Finishing held jobs as cancelled.
    CancelHeld(&'a [Lease]),
    /// Setting held jobs aside as unhandled.
    Park(&'a [Lease]),
    /// Recovering up to this many held jobs whose lease expired.
    RescueStale(i64),
    /// Deleting up to `limit` jobs in `status` that finished more than
    /// `older_than` ago.
    Prune {
        /// The finished status pruned.
        status: JobStatus,
        /// How long jobs in that status are kept.
        older_than: Duration,
        /// Rows deleted per statement.
        limit: i64,
    },
    /// The admission of new keyed jobs' read: up to `limit` due waiting
    /// jobs no admission looked at yet, of `queues` (every queue if empty).
    AdmitNewRead {
        /// The queues looked at.
        queues: &'a [String],
        /// Jobs read.
        limit: i64,
    },
    /// A completion's look at which of these keys have waiting jobs.
    KeysWithWaiting(&'a [QueueKey]),
    /// The admission of the next waiting jobs of these keys (without the
    /// admission lock that runs before it).
    AdmitKeys(&'a [QueueKey]),
    /// Marking these waiting jobs as looked at by an admission.
    MarkChecked(&'a [JobId]),
    /// Completing held steps of workflows and releasing the steps after
    /// them; `delete` deletes the completed rows.
    CompleteSteps {
        /// The steps completed.
        done: &'a [StepDone],
        /// Whether the completion deletes their rows.
        delete: bool,
    },
}

/// One plan node that reads `jobqueue_jobs`, or a workflow's steps or
/// edges (`jobqueue_workflow_steps`, `jobqueue_workflow_edges`).
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct TableRead {
    /// The node type (`Index Scan`, `Seq Scan`, ...).
    pub node: String,
    /// The index it reads, if any.
    pub index: Option<String>,
    /// How many times it ran.
    pub loops: f64,
    /// Rows it looked at over all its runs: those it returned and those its
    /// filters removed.
    pub rows_examined: f64,
}

/// The executed plan of one statement.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct Plan {
    /// `EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON)` output, pretty-printed.
    pub json: String,
    /// Every node that reads the jobs table or the workflow steps and
    /// edges.
    pub reads: Vec<TableRead>,
    /// Buffers (pages) the statement touched, hit or read.
    pub buffers: i64,
    /// Row pairs its joins looked at and discarded (`Rows Removed by Join
    /// Filter`, over all loops): a join that compares every row of one side
    /// with every row of the other shows here.
    pub join_rows_discarded: f64,
}

impl Plan {
    /// Rows of the jobs table examined by all reads together.
    pub fn rows_examined(&self) -> f64 {
        self.reads.iter().map(|read| read.rows_examined).sum()
    }
}

#[derive(QueryableByName)]
struct PlanRow {
    #[diesel(sql_type = Text, column_name = "QUERY PLAN")]
    plan: String,
}

/// Runs `statement` under `EXPLAIN ANALYZE` on `conn` (a queue session's
/// connection, with its settings) and rolls it back.
pub(crate) fn explain(conn: &mut PgConnection, statement: HotStatement<'_>) -> Result<Plan> {
    let json = match statement {
        HotStatement::Claim(claim) => {
            claim.validate()?;
            let honour = claim.global_limits == GlobalLimits::Honour;
            match (claim.queues.is_empty(), honour) {
                (true, false) => run(conn, &query::<sql::JobClaimAny>(claim))?,
                (false, false) => run(conn, &query::<sql::JobClaimQueues>(claim))?,
                (true, true) => run(conn, &query::<sql::JobClaimAnyLimited>(claim))?,
                (false, true) => run(conn, &query::<sql::JobClaimQueuesLimited>(claim))?,
            }
        }
        HotStatement::Start(leases) => run(conn, &fenced_query::<sql::JobStartMany>(leases))?,
        HotStatement::Complete(leases) => run(conn, &fenced_query::<sql::JobCompleteMany>(leases))?,
        HotStatement::CompleteAndDelete(leases) => {
            run(conn, &fenced_query::<sql::JobCompleteDeleteMany>(leases))?
        }
        HotStatement::Fail(failures) => run(conn, &fail_query(failures).0)?,
        HotStatement::Heartbeat(leases, lease) => run(
            conn,
            &heartbeat_query(&Beat::without_progress(leases), lease),
        )?,
        HotStatement::Release(leases) => run(conn, &fenced_query::<sql::JobReleaseMany>(leases))?,
        HotStatement::CancelHeld(leases) => {
            run(conn, &fenced_query::<sql::JobCancelHeldMany>(leases))?
        }
        HotStatement::Park(leases) => run(conn, &park_query(leases, "explain"))?,
        HotStatement::RescueStale(limit) => rolled_back(conn, |conn| {
            rescue_query(&explained(sql::JOB_RESCUE_STALE), limit).load(conn)
        })?,
        HotStatement::Prune {
            status,
            older_than,
            limit,
        } => rolled_back(conn, |conn| {
            prune_query(&explained(sql::JOB_PRUNE), status, older_than, limit).load(conn)
        })?,
        HotStatement::AdmitNewRead { queues, limit } => run(conn, &new_query(queues, None, limit))?,
        HotStatement::KeysWithWaiting(keys) => run(conn, &with_waiting_query(keys))?,
        HotStatement::AdmitKeys(keys) => run(conn, &admit_query(keys))?,
        HotStatement::MarkChecked(ids) => run(conn, &mark_checked_query(ids))?,
        HotStatement::CompleteSteps { done, delete: true } => {
            run(conn, &steps_query::<sql::JobCompleteDeleteStepsMany>(done))?
        }
        HotStatement::CompleteSteps {
            done,
            delete: false,
        } => run(conn, &steps_query::<sql::JobCompleteStepsMany>(done))?,
    };
    summarize(&json)
}

/// `EXPLAIN ANALYZE` of `query` in a transaction that is rolled back.
fn run<S: Statement>(conn: &mut PgConnection, query: &Prepared<'_, S>) -> Result<String> {
    rolled_back(conn, |conn| ExplainAnalyze(query).load(conn))
}

/// `sql` under `EXPLAIN ANALYZE`.
fn explained(sql: &str) -> String {
    format!("{EXPLAIN_ANALYZE}{sql}")
}

/// The plan `explain` loads, in a transaction that is rolled back.
fn rolled_back(
    conn: &mut PgConnection,
    explain: impl FnOnce(&mut PgConnection) -> QueryResult<Vec<PlanRow>>,
) -> Result<String> {
    AnsiTransactionManager::begin_transaction(&mut *conn)?;
    let result = explain(conn);
    AnsiTransactionManager::rollback_transaction(&mut *conn)?;
    Ok(result?
        .into_iter()
        .map(|row| row.plan)
        .collect::<Vec<_>>()
        .join("\n"))
}

fn summarize(json: &str) -> Result<Plan> {
    let value: serde_json::Value = serde_json::from_str(json)
        .map_err(|e| crate::Error::invalid("plan", format!("EXPLAIN output is not JSON: {e}")))?;
    let root = &value[0]["Plan"];
    let mut reads = Vec::new();
    let mut join_rows_discarded = 0.0;
    collect_reads(root, &mut reads, &mut join_rows_discarded);
    let number = |key: &str| root[key].as_i64().unwrap_or(0);
    Ok(Plan {
        json: serde_json::to_string_pretty(&value).unwrap_or_else(|_| json.to_owned()),
        reads,
        buffers: number("Shared Hit Blocks") + number("Shared Read Blocks"),
        join_rows_discarded,
    })
}

fn collect_reads(node: &serde_json::Value, reads: &mut Vec<TableRead>, discarded: &mut f64) {
    let number = |key: &str| node[key].as_f64().unwrap_or(0.0);
    let kind = node["Node Type"].as_str().unwrap_or("");
    let loops = number("Actual Loops");
    *discarded += number("Rows Removed by Join Filter") * loops;
    // A node never executed (loops 0: a branch the statement did not take,
    // such as the count of a limited queue's held jobs when no queue is
    // limited) read nothing.
    let relation = node["Relation Name"].as_str().unwrap_or("");
    let read_here = matches!(
        relation,
        "jobqueue_jobs" | "jobqueue_workflow_steps" | "jobqueue_workflow_edges"
    );
    if read_here && kind != "ModifyTable" && loops > 0.0 {
        // EXPLAIN gives rows and removed rows per loop.
        let per_loop = number("Actual Rows")
            + number("Rows Removed by Filter")
            + number("Rows Removed by Index Recheck");
        reads.push(TableRead {
            node: kind.to_owned(),
            index: node["Index Name"].as_str().map(str::to_owned),
            loops,
            rows_examined: per_loop * loops,
        });
    }
    if let Some(children) = node["Plans"].as_array() {
        for child in children {
            collect_reads(child, reads, discarded);
        }
    }
}

impl crate::session::QueueSession {
    /// Runs `statement` under `EXPLAIN ANALYZE` with this session's
    /// settings, rolls it back, and returns its plan: which indexes serve
    /// it and how many rows it examined. For checking that the hot path's
    /// cost is its own batch's, whatever the table holds.
    pub fn explain(&mut self, statement: HotStatement<'_>) -> Result<Plan> {
        explain(self.conn(), statement)
    }
}
