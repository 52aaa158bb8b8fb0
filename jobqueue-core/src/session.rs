//! A connection dedicated to queue work, with its session set up once.
//!
//! Its operations live beside what they do, each next to the same
//! operation in a transaction of the caller's: the claim in `claim.rs`,
//! completions, failures and releases in `finish.rs`, heartbeats in
//! `heartbeat.rs`, the maintenance statements in their own modules.

use diesel::connection::SimpleConnection;
use diesel::{Connection, PgConnection, RunQueryDsl};

use crate::{Result, sql};

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
}
