//! Claiming due jobs: one statement, `FOR UPDATE SKIP LOCKED`.

use std::time::Duration;

use diesel::prelude::*;
use diesel::sql_types::{Array, BigInt, Double, Text};

use crate::isolation::{CLAIM_BEGIN, Scope, in_transaction, scoped};
use crate::prepared::prepared;
use crate::{Error, JobRow, Result, limits, sql};

/// Default lease: how long a claim holds a job without a heartbeat.
pub const DEFAULT_LEASE: Duration = Duration::from_secs(30);

/// What to claim, and for whom.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Claim {
    /// Who claims: stored on the row while it is held.
    pub worker_id: String,
    /// Queues to claim from; empty means every queue.
    pub queues: Vec<String>,
    /// Job types to claim; empty means every type.
    pub job_types: Vec<String>,
    /// Most jobs to claim at once. Default 10.
    pub limit: i64,
    /// How long the claim holds each job without a heartbeat. Default 30 s.
    pub lease: Duration,
}

impl Claim {
    /// A claim for `worker_id` of up to 10 jobs of any type from any queue.
    pub fn new(worker_id: impl Into<String>) -> Self {
        Claim {
            worker_id: worker_id.into(),
            queues: Vec::new(),
            job_types: Vec::new(),
            limit: 10,
            lease: DEFAULT_LEASE,
        }
    }

    /// Only from these queues.
    pub fn queues<S: Into<String>>(mut self, queues: impl IntoIterator<Item = S>) -> Self {
        self.queues = queues.into_iter().map(Into::into).collect();
        self
    }

    /// Only these job types.
    pub fn job_types<S: Into<String>>(mut self, types: impl IntoIterator<Item = S>) -> Self {
        self.job_types = types.into_iter().map(Into::into).collect();
        self
    }

    /// At most `limit` jobs.
    pub fn limit(mut self, limit: i64) -> Self {
        self.limit = limit;
        self
    }

    /// Hold each job for `lease` without a heartbeat.
    pub fn lease(mut self, lease: Duration) -> Self {
        self.lease = lease;
        self
    }

    fn validate(&self) -> Result<()> {
        if self.worker_id.is_empty() || self.worker_id.len() > 200 || self.worker_id.contains('\0')
        {
            return Err(Error::invalid(
                "worker_id",
                "must be 1 to 200 bytes, without NUL",
            ));
        }
        for queue in &self.queues {
            limits::check_queue(queue)?;
        }
        for job_type in &self.job_types {
            limits::check_job_type(job_type)?;
        }
        if !(1..=10_000).contains(&self.limit) {
            return Err(Error::invalid(
                "limit",
                format!("{} is out of range (1 to 10000)", self.limit),
            ));
        }
        if self.lease < Duration::from_millis(100) {
            return Err(Error::invalid(
                "lease",
                format!("{:?} is shorter than 100 ms", self.lease),
            ));
        }
        Ok(())
    }
}

/// Claims up to `claim.limit` due pending jobs in ONE statement and returns
/// them, highest priority first, then by `run_at`, then by id.
///
/// Each claimed row is `claimed` by `claim.worker_id`, with one more attempt
/// used, a new fencing token ([`JobRow::lease`]) and a lease of `claim.lease`
/// from the database's `now()`. Concurrent claimers never get the same job.
pub fn claim(conn: &mut PgConnection, claim: &Claim) -> Result<Vec<JobRow>> {
    claim_in(conn, Scope::Own, claim)
}

pub(crate) fn claim_in(
    conn: &mut PgConnection,
    scope: Scope,
    claim: &Claim,
) -> Result<Vec<JobRow>> {
    claim.validate()?;
    let mut rows = scoped(conn, scope, CLAIM_BEGIN, |conn| {
        Ok(prepared::<sql::JobClaimMany>()
            .bind::<Array<Text>, _>(&claim.queues)
            .bind::<Array<Text>, _>(&claim.job_types)
            .bind::<BigInt, _>(claim.limit)
            .bind::<Text, _>(&claim.worker_id)
            .bind::<Double, _>(claim.lease.as_secs_f64())
            .load::<JobRow>(conn)?)
    })?;
    // UPDATE ... RETURNING does not keep the CTE's order.
    rows.sort_by(|a, b| {
        b.priority
            .cmp(&a.priority)
            .then(a.run_at.cmp(&b.run_at))
            .then(a.id.cmp(&b.id))
    });
    Ok(rows)
}

/// The query plan PostgreSQL chooses for `claim` (`EXPLAIN` of the claim
/// statement with its parameters bound), one line per plan node. For
/// checking that the claim is served by the pending-jobs index.
pub fn explain_claim(conn: &mut PgConnection, claim: &Claim) -> Result<String> {
    #[derive(QueryableByName)]
    struct PlanLine {
        #[diesel(sql_type = Text, column_name = "QUERY PLAN")]
        line: String,
    }
    claim.validate()?;
    let lines = in_transaction(conn, CLAIM_BEGIN, |conn| {
        Ok(
            diesel::sql_query(format!("EXPLAIN {}", sql::JOB_CLAIM_MANY))
                .bind::<Array<Text>, _>(&claim.queues)
                .bind::<Array<Text>, _>(&claim.job_types)
                .bind::<BigInt, _>(claim.limit)
                .bind::<Text, _>(&claim.worker_id)
                .bind::<Double, _>(claim.lease.as_secs_f64())
                .load::<PlanLine>(conn)?,
        )
    })?;
    Ok(lines
        .into_iter()
        .map(|l| l.line)
        .collect::<Vec<_>>()
        .join("\n"))
}
