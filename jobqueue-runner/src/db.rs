//! A connection owned by one runner thread, re-established after it breaks.

use std::sync::Arc;
use std::time::Duration;

use diesel::{Connection, PgConnection, RunQueryDsl};
use jobqueue_core::engine::QueueSession;

use crate::hang_guard::{Watchdog, Watched};
use crate::health::{ConnectFailures, Health, one_line};
use crate::host_order::HostOrder;
use crate::shared::Shared;

/// A lazily (re)connected connection for one of the runner's own threads.
pub(crate) struct Db {
    hosts: Arc<HostOrder>,
    role: &'static str,
    conn: Option<QueueSession>,
    /// The last call failed because its connection was lost.
    lost: bool,
    /// Connection attempts that failed in a row.
    failures: ConnectFailures,
    /// The connection, as the hung-connection watchdog sees it.
    watched: Arc<Watched>,
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
            hosts: Arc::clone(&shared.hosts),
            role,
            conn: None,
            lost: false,
            failures: ConnectFailures::default(),
            watched: shared.watchdog.watch(role),
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
    /// `VACUUM`): not ended by the watchdog.
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
            slot => match self.hosts.connect(|url| connect(url, &self.watched)) {
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
        let result = {
            let _call = limit.map(|limit| self.watched.begin(limit));
            f(conn)
        };
        let e = match result {
            Ok(value) => {
                health.report_up();
                return Ok(value);
            }
            Err(e) => e,
        };
        let usable = !e.is_read_only() && {
            let _call = self.watched.begin(self.limit);
            conn.is_alive()
        };
        if usable {
            health.report_up();
            return Err(e);
        }
        self.lost = true;
        if e.is_read_only() {
            self.watchdog.server_read_only(&self.watched);
        }
        self.watched.set_connection(None);
        self.conn = None;
        match self.hosts.connect(|url| connect(url, &self.watched)) {
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

/// The longest a runner thread's own connection may sit idle inside a
/// transaction. Its transactions last milliseconds; one stays open only if
/// the process froze inside it (SIGSTOP, a paused VM, a swap storm), and its
/// row locks would then keep every other runner's recovery (which skips
/// locked rows) off its jobs until it resumes. The server ends such a
/// session after this long, releasing the locks.
const IDLE_IN_TRANSACTION_TIMEOUT: &str = "5s";

/// Connects and sets the session up for a runner thread; refuses a
/// server that takes no writes ([`jobqueue_core::Error::ReadOnly`]).
fn connect(url: &str, watched: &Watched) -> jobqueue_core::Result<QueueSession> {
    let mut conn = PgConnection::establish(url)?;
    let check = diesel::sql_query(format!(
        "SELECT set_config('idle_in_transaction_session_timeout', \
                           '{IDLE_IN_TRANSACTION_TIMEOUT}', false) AS setting,
                current_setting('transaction_read_only') AS read_only"
    ))
    .get_result::<SessionCheck>(&mut conn)?;
    debug_assert_eq!(check.setting, IDLE_IN_TRANSACTION_TIMEOUT);
    if check.read_only == "on" {
        return Err(jobqueue_core::Error::ReadOnly);
    }
    let mut session = QueueSession::new(conn)?;
    watched.set_connection(Some(session.conn()));
    Ok(session)
}

#[derive(diesel::QueryableByName)]
struct SessionCheck {
    #[diesel(sql_type = diesel::sql_types::Text)]
    setting: String,
    #[diesel(sql_type = diesel::sql_types::Text)]
    read_only: String,
}
