//! A connection dedicated to queue work, with its session set up once.

use std::time::Duration;

use diesel::connection::SimpleConnection;
use diesel::{Connection, PgConnection, RunQueryDsl};

use crate::claim::Claim;
use crate::fenced::fenced_update;
use crate::finish::{FailedMany, Failure};
use crate::heartbeat::{Beat, Heartbeat};
use crate::isolation::Scope;
use crate::lease::{Fenced, Lease};
use crate::plan::{HotStatement, Plan};
use crate::prune::Pruned;
use crate::rescue::Rescued;
use crate::{JobRow, Result, Retention, sql};

/// A connection used only for the queue's own statements (a runner's
/// fetcher, completer, lease keeper, maintenance).
///
/// Its session is set once to what each queue statement otherwise sets in a
/// transaction of its own — READ COMMITTED, and the claim's ordered index
/// scan (`enable_bitmapscan` and `enable_sort` off) — so every operation
/// here is one autocommitted statement: one round trip instead of three.
/// Use it for nothing else: the planner settings would apply to other
/// queries too.
pub struct QueueSession {
    conn: PgConnection,
}

impl std::fmt::Debug for QueueSession {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("QueueSession").finish_non_exhaustive()
    }
}

/// What one vacuum of the jobs table did ([`QueueSession::vacuum_if_needed`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Vacuumed {
    /// Dead row versions before it.
    pub dead_before: i64,
    /// Dead row versions it could not remove.
    pub dead_after: i64,
}

impl Vacuumed {
    /// Dead row versions it removed, as far as the statistics tell (rows
    /// that died while it ran count against it; never below 0).
    pub fn removed(&self) -> i64 {
        (self.dead_before - self.dead_after).max(0)
    }

    /// Whether it removed less than half of the dead row versions: the
    /// xmin horizon is held back, and vacuuming again achieves nothing
    /// until it moves.
    pub fn reclaimed_little(&self) -> bool {
        self.dead_after.saturating_mul(2) > self.dead_before
    }
}

impl QueueSession {
    /// Connects to `url` and sets the session up.
    pub fn establish(url: &str) -> Result<Self> {
        Self::new(PgConnection::establish(url)?)
    }

    /// Sets up the session of `conn`, which becomes dedicated to the queue.
    pub fn new(mut conn: PgConnection) -> Result<Self> {
        conn.batch_execute(sql::SESSION_SETUP)?;
        Ok(QueueSession { conn })
    }

    /// The underlying connection (for reads; keep the session's settings).
    pub fn conn(&mut self) -> &mut PgConnection {
        &mut self.conn
    }

    /// Whether the connection still answers (`SELECT 1`).
    pub fn is_alive(&mut self) -> bool {
        diesel::sql_query(sql::SESSION_ALIVE)
            .execute(&mut self.conn)
            .is_ok()
    }

    /// [`crate::claim::claim`], in one round trip.
    pub fn claim(&mut self, claim: &Claim) -> Result<Vec<JobRow>> {
        Ok(crate::claim::claim_in(&mut self.conn, Scope::Session, claim)?.rows)
    }

    /// [`crate::claim::claim_paced`], in one round trip.
    pub fn claim_paced(&mut self, claim: &Claim) -> Result<crate::claim::Claimed> {
        crate::claim::claim_in(&mut self.conn, Scope::Session, claim)
    }

    /// [`crate::queue_head::queue_heads`], in one round trip.
    pub fn queue_heads(
        &mut self,
        queues: &[String],
    ) -> Result<Vec<(String, crate::queue_head::QueueHead)>> {
        crate::queue_head::queue_heads(&mut self.conn, queues)
    }

    /// [`crate::queue_head::queue_head`], in one round trip.
    pub fn queue_head(&mut self, queue: &str) -> Result<crate::queue_head::QueueHead> {
        crate::queue_head::queue_head(&mut self.conn, queue)
    }

    /// [`crate::finish::complete_many`], in one round trip.
    pub fn complete_many(&mut self, leases: &[Lease]) -> Result<Fenced> {
        fenced_update::<sql::JobCompleteMany>(&mut self.conn, Scope::Session, leases)
    }

    /// [`crate::finish::complete_and_delete_many`], in one round trip.
    pub fn complete_and_delete_many(&mut self, leases: &[Lease]) -> Result<Fenced> {
        fenced_update::<sql::JobCompleteDeleteMany>(&mut self.conn, Scope::Session, leases)
    }

    /// [`crate::workflow_release::complete_steps_many`], in one round trip.
    pub fn complete_steps_many(
        &mut self,
        done: &[crate::workflow_release::StepDone],
        delete: bool,
    ) -> Result<Fenced> {
        crate::workflow_release::complete_steps_in(&mut self.conn, Scope::Session, done, delete)
    }

    /// [`crate::workflow_release::settle_ended_page`].
    pub fn settle_ended_page(
        &mut self,
        after: Option<crate::JobId>,
        batch: i64,
        recent: Option<std::time::Duration>,
    ) -> Result<crate::workflow_release::Settled> {
        crate::workflow_release::settle_ended_page(&mut self.conn, after, batch, recent)
    }

    /// [`crate::workflow_release::settle_ended_of`].
    pub fn settle_ended_of(
        &mut self,
        ids: &[crate::JobId],
    ) -> Result<crate::workflow_release::Settled> {
        crate::workflow_release::settle_ended_of(&mut self.conn, ids)
    }

    /// [`crate::finish::fail_many`], in one round trip.
    pub fn fail_many(&mut self, failures: &[Failure]) -> Result<FailedMany> {
        crate::finish::fail_many_in(&mut self.conn, Scope::Session, failures)
    }

    /// [`crate::finish::release_many`], in one round trip.
    pub fn release_many(&mut self, leases: &[Lease]) -> Result<Fenced> {
        fenced_update::<sql::JobReleaseMany>(&mut self.conn, Scope::Session, leases)
    }

    /// [`crate::finish::park_many`], in one round trip.
    pub fn park_many(&mut self, leases: &[Lease], runner: &str) -> Result<Fenced> {
        crate::fenced::run_fenced(
            &mut self.conn,
            Scope::Session,
            leases,
            crate::finish::park_query(leases, runner),
        )
    }

    /// [`crate::admission::admit_keys`]: one transaction.
    pub fn admit_keys(&mut self, keys: &[crate::admission::QueueKey]) -> Result<i64> {
        crate::admission::admit_keys(&mut self.conn, keys)
    }

    /// [`crate::admission::admit_keys_in_line`]: one transaction.
    pub fn admit_keys_in_line(&mut self, keys: &[crate::admission::QueueKey]) -> Result<i64> {
        crate::admission::admit_keys_in_line(&mut self.conn, keys)
    }

    /// [`crate::admission::any_waiting`]: one read.
    pub fn any_waiting(&mut self, queues: &[String]) -> Result<bool> {
        crate::admission::any_waiting(&mut self.conn, queues)
    }

    /// [`crate::admission::admit_new`]: a read, then one transaction if
    /// it found jobs.
    pub fn admit_new(
        &mut self,
        queues: &[String],
        after: Option<&crate::admission::NewCursor>,
        limit: i64,
    ) -> Result<crate::admission::NewAdmitted> {
        crate::admission::admit_new(&mut self.conn, queues, after, limit)
    }

    /// [`crate::admission::sweep_keys`]: a read, then one transaction if
    /// some key has room.
    pub fn sweep_keys(
        &mut self,
        queues: &[String],
        after: Option<&crate::admission::QueueKey>,
        limit: i64,
    ) -> Result<crate::admission::Sweep> {
        crate::admission::sweep_keys(&mut self.conn, queues, after, limit)
    }

    /// [`crate::ready::promote_due`], in one round trip.
    pub fn promote_due(&mut self, limit: i64) -> Result<i64> {
        crate::ready::promote_due_in(&mut self.conn, Scope::Session, limit)
    }

    /// [`crate::ready::reclaim_unhandled`], in one round trip.
    pub fn reclaim_unhandled(
        &mut self,
        job_types: &[String],
        queues: &[String],
        limit: i64,
    ) -> Result<i64> {
        crate::ready::reclaim_unhandled_in(&mut self.conn, Scope::Session, job_types, queues, limit)
    }

    /// [`crate::set_aside::set_aside_due`], in one round trip.
    pub fn set_aside_due(
        &mut self,
        (queue, job_type): (&str, &str),
        after: Option<&crate::claim::Resume>,
        limit: i64,
        runner: &str,
    ) -> Result<crate::set_aside::SetAside> {
        crate::set_aside::set_aside_due_in(
            &mut self.conn,
            Scope::Session,
            (queue, job_type),
            after,
            limit,
            runner,
        )
    }

    /// Runs `statement` under `EXPLAIN ANALYZE` with this session's
    /// settings, rolls it back, and returns its plan: which indexes serve
    /// it and how many rows it examined. For checking that the hot path's
    /// cost is its own batch's, whatever the table holds.
    pub fn explain(&mut self, statement: HotStatement<'_>) -> Result<Plan> {
        crate::plan::explain(&mut self.conn, statement)
    }

    /// [`crate::finish::cancel_held_many`], in one round trip.
    pub fn cancel_held_many(&mut self, leases: &[Lease]) -> Result<Fenced> {
        fenced_update::<sql::JobCancelHeldMany>(&mut self.conn, Scope::Session, leases)
    }

    /// Whether any of `queues` (all queues if empty) has a global limit or
    /// a rate limit (see [`crate::set_queue_limit`],
    /// [`crate::set_queue_rate_limit`]): a claim that may take from such a
    /// queue needs [`crate::claim::GlobalLimits::Honour`].
    pub fn any_global_limit(&mut self, queues: &[String]) -> Result<bool> {
        crate::queues::any_global_limit(&mut self.conn, queues)
    }

    /// [`crate::snooze::snooze_many`], in one round trip.
    pub fn snooze_many(
        &mut self,
        snoozes: &[crate::snooze::Snooze],
        max_snoozes: i32,
    ) -> Result<crate::snooze::Snoozed> {
        crate::snooze::snooze_many_in(&mut self.conn, Scope::Session, snoozes, max_snoozes)
    }

    /// [`crate::finish::start_many`], in one round trip.
    pub fn start_many(&mut self, leases: &[Lease]) -> Result<Fenced> {
        fenced_update::<sql::JobStartMany>(&mut self.conn, Scope::Session, leases)
    }

    /// [`crate::heartbeat::heartbeat_many`], in one round trip.
    pub fn heartbeat_many(&mut self, leases: &[Lease], lease: Duration) -> Result<Heartbeat> {
        let beats = Beat::without_progress(leases);
        crate::heartbeat::heartbeat_many_in(&mut self.conn, Scope::Session, &beats, lease)
    }

    /// [`crate::heartbeat::heartbeat_with_progress`], in one round trip.
    pub fn heartbeat_with_progress(
        &mut self,
        beats: &[Beat],
        lease: Duration,
    ) -> Result<Heartbeat> {
        crate::heartbeat::heartbeat_many_in(&mut self.conn, Scope::Session, beats, lease)
    }

    /// [`crate::rescue::rescue_stale`], in one round trip.
    pub fn rescue_stale(&mut self, limit: i64) -> Result<Rescued> {
        crate::rescue::rescue_stale_in(&mut self.conn, Scope::Session, limit)
    }

    /// Vacuums the jobs table if it holds at least `min_dead` dead row
    /// versions (and no other session is vacuuming it); returns the dead
    /// row versions before and after when it did. Every claim and completion
    /// leaves a dead version behind, and until they are vacuumed the claim's
    /// index scan steps over their entries; autovacuum visits a table at
    /// most once a minute. Versions a vacuum cannot remove (a transaction,
    /// replication slot or prepared transaction still holds the xmin horizon
    /// from before they died) are still counted after it.
    ///
    /// With `truncate`, the vacuum also shortens the table by the empty
    /// pages at its end, which takes an `ACCESS EXCLUSIVE` lock: every
    /// claim and completion waits behind it, for up to about 20 ms. Without,
    /// the empty pages stay and take new rows.
    pub fn vacuum_if_needed(&mut self, min_dead: i64, truncate: bool) -> Result<Option<Vacuumed>> {
        let dead_before = self.dead_row_versions()?;
        if dead_before < min_dead {
            return Ok(None);
        }
        let vacuum = if truncate {
            sql::JOB_VACUUM_TRUNCATE
        } else {
            sql::JOB_VACUUM
        };
        diesel::sql_query(vacuum).execute(&mut self.conn)?;
        let dead_after = self.dead_row_versions()?;
        Ok(Some(Vacuumed {
            dead_before,
            dead_after,
        }))
    }

    /// `engine::xmin_horizon`: what holds this database's xmin horizon
    /// back now, if anything but this session.
    pub fn xmin_horizon(&mut self) -> Result<crate::horizon::Horizon> {
        crate::horizon::xmin_horizon(&mut self.conn)
    }

    /// Dead row versions of the jobs table, as the statistics count them.
    fn dead_row_versions(&mut self) -> Result<i64> {
        #[derive(diesel::QueryableByName)]
        struct Dead {
            #[diesel(sql_type = diesel::sql_types::BigInt)]
            dead: i64,
        }
        Ok(diesel::sql_query(sql::JOB_DEAD_TUPLES)
            .get_result::<Dead>(&mut self.conn)?
            .dead)
    }

    /// [`crate::prune::prune`], one round trip per batch.
    pub fn prune(&mut self, retention: &Retention) -> Result<Pruned> {
        crate::prune::prune_in(&mut self.conn, Scope::Session, retention)
    }
}
