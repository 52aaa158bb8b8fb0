//! A connection owned by one runner thread, re-established after it breaks.

use diesel::{Connection, PgConnection, RunQueryDsl};
use jobqueue_core::QueueSession;

use crate::health::{ConnectFailures, Health, one_line};

/// A lazily (re)connected connection for one of the runner's own threads.
pub(crate) struct Db {
    url: String,
    role: &'static str,
    conn: Option<QueueSession>,
    /// The last call failed because its connection was lost.
    lost: bool,
    /// Connection attempts that failed in a row.
    failures: ConnectFailures,
}

impl Db {
    pub(crate) fn new(url: &str, role: &'static str) -> Self {
        Db {
            url: url.to_owned(),
            role,
            conn: None,
            lost: false,
            failures: ConnectFailures::default(),
        }
    }

    /// Runs `f` on the connection, connecting first if needed.
    ///
    /// After an error, a connection that no longer answers is replaced at
    /// once. Only when no new connection can be made is the database
    /// reported down to `health` (logged once per outage, for all threads);
    /// a single connection ended by the server (a terminated backend) is an
    /// info line. [`Db::lost_connection`] tells the caller which it was.
    pub(crate) fn run<T>(
        &mut self,
        health: &Health,
        f: impl FnOnce(&mut QueueSession) -> jobqueue_core::Result<T>,
    ) -> jobqueue_core::Result<T> {
        self.lost = false;
        let conn = match &mut self.conn {
            Some(conn) => conn,
            slot => match connect(&self.url) {
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
        match f(conn) {
            Ok(value) => {
                health.report_up();
                Ok(value)
            }
            Err(e) if conn.is_alive() => {
                health.report_up();
                Err(e)
            }
            Err(e) => {
                self.lost = true;
                self.conn = None;
                match connect(&self.url) {
                    Ok(conn) => {
                        log::info!(
                            "{}: connection lost ({}); reconnected",
                            self.role,
                            one_line(&e)
                        );
                        self.conn = Some(conn);
                        self.failures.connected(health);
                    }
                    Err(reconnect) => self.failures.failed(health, self.role, &reconnect),
                }
                Err(e)
            }
        }
    }

    /// Whether the last [`Db::run`] failed for want of a connection (an
    /// outage, or a connection the server ended), as opposed to an error of
    /// the statement itself.
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

/// Connects and sets the session up for a runner thread.
fn connect(url: &str) -> jobqueue_core::Result<QueueSession> {
    let mut conn = PgConnection::establish(url)?;
    diesel::sql_query(format!(
        "SET idle_in_transaction_session_timeout = '{IDLE_IN_TRANSACTION_TIMEOUT}'"
    ))
    .execute(&mut conn)?;
    QueueSession::new(conn)
}
