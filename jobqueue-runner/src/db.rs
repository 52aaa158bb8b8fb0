//! A connection owned by one runner thread, re-established after it breaks.

use diesel::{Connection, PgConnection, RunQueryDsl};
use jobqueue_core::QueueSession;

use crate::shared::Health;

/// A lazily (re)connected connection for one of the runner's own threads.
pub(crate) struct Db {
    url: String,
    role: &'static str,
    conn: Option<QueueSession>,
}

impl Db {
    pub(crate) fn new(url: &str, role: &'static str) -> Self {
        Db {
            url: url.to_owned(),
            role,
            conn: None,
        }
    }

    /// Runs `f` on the connection, connecting first if needed. After an
    /// error, a connection that no longer answers is dropped (the next call
    /// reconnects) and the outage is reported to `health` (logged once).
    pub(crate) fn run<T>(
        &mut self,
        health: &Health,
        f: impl FnOnce(&mut QueueSession) -> jobqueue_core::Result<T>,
    ) -> jobqueue_core::Result<T> {
        let conn = match &mut self.conn {
            Some(conn) => conn,
            slot => match connect(&self.url) {
                Ok(conn) => slot.insert(conn),
                Err(e) => {
                    health.report_down(self.role, &e);
                    return Err(e);
                }
            },
        };
        match f(conn) {
            Ok(value) => {
                health.report_up();
                Ok(value)
            }
            Err(e) => {
                let alive = conn.is_alive();
                if alive {
                    health.report_up();
                } else {
                    health.report_down(self.role, &e);
                    self.conn = None;
                }
                Err(e)
            }
        }
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
