//! A connection owned by one runner thread, re-established after it breaks.

use std::sync::Arc;
use std::time::Duration;

use jobqueue_core::engine::QueueSession;

use crate::connector::Connector;
use crate::hang_guard::{Guarded, Watchdog};
use crate::health::{ConnectFailures, Health, one_line};
use crate::shared::Shared;

/// A lazily (re)connected connection for one of the runner's own threads.
pub(crate) struct Db {
    connector: Arc<Connector>,
    role: &'static str,
    conn: Option<Guarded<QueueSession>>,
    /// The last call failed because its connection was lost.
    lost: bool,
    /// Connection attempts that failed in a row.
    failures: ConnectFailures,
    /// The watchdog, which also closes the handlers' connections to a
    /// server found read-only.
    watchdog: Arc<Watchdog>,
    /// How long one call may take before the watchdog ends the connection.
    limit: Duration,
}

impl Db {
    /// The connection of the runner thread `role`, watched for hangs.
    pub(crate) fn new(shared: &Shared, role: &'static str) -> Self {
        Db {
            connector: Arc::clone(&shared.connector),
            role,
            conn: None,
            lost: false,
            failures: ConnectFailures::default(),
            watchdog: Arc::clone(&shared.watchdog),
            limit: shared.config.db_timeout,
        }
    }

    /// Runs `f` on the connection, connecting first if needed.
    ///
    /// After an error, a connection that no longer answers, or that answers
    /// read-only (a standby, or a primary fenced off after a failover), is
    /// replaced at once. Only when no new connection can be made is the
    /// database reported down to `health` (logged once per outage, for all
    /// threads); a single connection ended by the server (a terminated
    /// backend) is an info line. [`Db::lost_connection`] tells the caller
    /// which it was.
    pub(crate) fn run<T>(
        &mut self,
        health: &Health,
        f: impl FnOnce(&mut QueueSession) -> jobqueue_core::Result<T>,
    ) -> jobqueue_core::Result<T> {
        self.run_within(health, Some(self.limit), f)
    }

    /// [`Db::run`] for a call that may take as long as it takes (a
    /// `VACUUM`): ended by the watchdog only when its server is found hung
    /// (another call to it overran), or at the runner's stop deadline.
    pub(crate) fn run_unbounded<T>(
        &mut self,
        health: &Health,
        f: impl FnOnce(&mut QueueSession) -> jobqueue_core::Result<T>,
    ) -> jobqueue_core::Result<T> {
        self.run_within(health, None, f)
    }

    fn run_within<T>(
        &mut self,
        health: &Health,
        limit: Option<Duration>,
        f: impl FnOnce(&mut QueueSession) -> jobqueue_core::Result<T>,
    ) -> jobqueue_core::Result<T> {
        self.lost = false;
        let conn = match &mut self.conn {
            Some(conn) => conn,
            slot => match self.connector.queue_session(self.role) {
                Ok(conn) => {
                    self.failures.connected(health);
                    slot.insert(conn)
                }
                Err(e) => {
                    self.lost = true;
                    self.failures.failed(health, self.role, &e);
                    return Err(e);
                }
            },
        };
        let result = conn.call(limit, f);
        let e = match result {
            Ok(value) => {
                health.report_up();
                return Ok(value);
            }
            Err(e) => e,
        };
        let usable = !e.is_read_only() && conn.call(Some(self.limit), QueueSession::is_alive);
        if usable {
            health.report_up();
            return Err(e);
        }
        self.lost = true;
        if e.is_read_only() {
            self.watchdog.server_read_only(conn.watched());
        }
        self.conn = None;
        match self.connector.queue_session(self.role) {
            Ok(conn) => {
                log::info!(
                    "{}: connection {} ({}); reconnected",
                    self.role,
                    if e.is_read_only() {
                        "became read-only"
                    } else {
                        "lost"
                    },
                    one_line(&e)
                );
                self.conn = Some(conn);
                self.failures.connected(health);
            }
            Err(reconnect) => self.failures.failed(health, self.role, &reconnect),
        }
        Err(e)
    }

    /// Whether the last [`Db::run`] failed for want of a connection (an
    /// outage, a read-only server, or a connection the server ended), as
    /// opposed to an error of the statement itself.
    pub(crate) fn lost_connection(&self) -> bool {
        self.lost
    }
}
