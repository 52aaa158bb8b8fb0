//! A connection owned by one runner thread, re-established after it breaks.

use diesel::{Connection, PgConnection, RunQueryDsl};

use crate::shared::Health;

/// A lazily (re)connected connection for one of the runner's own threads.
pub(crate) struct Db {
    url: String,
    role: &'static str,
    conn: Option<PgConnection>,
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
        f: impl FnOnce(&mut PgConnection) -> jobqueue_core::Result<T>,
    ) -> jobqueue_core::Result<T> {
        let conn = match &mut self.conn {
            Some(conn) => conn,
            slot => match PgConnection::establish(&self.url) {
                Ok(conn) => slot.insert(conn),
                Err(e) => {
                    health.report_down(self.role, &e);
                    return Err(e.into());
                }
            },
        };
        match f(conn) {
            Ok(value) => {
                health.report_up();
                Ok(value)
            }
            Err(e) => {
                let alive = diesel::sql_query("SELECT 1").execute(conn).is_ok();
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
