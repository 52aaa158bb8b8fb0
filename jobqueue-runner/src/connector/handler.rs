//! How the runner's connections are made: the libpq options added to the
//! URL so that a dead or frozen server is noticed in bounded time, and the
//! handler pool's connections, refused when the server takes no writes.
//!
//! Options the URL sets itself are kept. The defaults, for a
//! `RunnerConfig::db_timeout` of T seconds:
//!
//! - `connect_timeout` T (2 to 10 s): per host, so a multi-host URL moves
//!   on from a host that accepts the TCP connection and never answers;
//! - `keepalives_idle=10`, `keepalives_interval=5`, `keepalives_count=3`:
//!   an idle connection to a host that vanished ends in about 25 s;
//! - `tcp_user_timeout` T: a connection whose sent data goes unacknowledged
//!   (a host gone behind a network that drops packets) ends after T.
//!
//! None of these ends a connection to a frozen server process whose host
//! still acknowledges packets: that is `hang_guard`'s work.

use std::sync::Arc;
use std::time::Duration;

use diesel::r2d2::ManageConnection;
use diesel::{Connection, PgConnection, RunQueryDsl};

use crate::RunnerError;
use crate::hang_guard::Watchdog;
use crate::host_order::HostOrder;

/// `url` with the runner's connection defaults for the options it does not
/// set (see the module documentation).
pub(crate) fn libpq_url(url: &str, db_timeout: Duration) -> Result<String, RunnerError> {
    let secs = db_timeout.as_secs_f64();
    let defaults = [
        ("connect_timeout", connect_timeout(db_timeout).to_string()),
        ("keepalives", "1".to_owned()),
        ("keepalives_idle", "10".to_owned()),
        ("keepalives_interval", "5".to_owned()),
        ("keepalives_count", "3".to_owned()),
        (
            "tcp_user_timeout",
            format!("{}", (secs * 1000.0).round() as u64),
        ),
    ];
    crate::listener_tls::with_options(url, &defaults)
}

/// Whole seconds for libpq's `connect_timeout` (which takes at least 2).
fn connect_timeout(db_timeout: Duration) -> u64 {
    db_timeout.as_secs_f64().ceil().clamp(2.0, 10.0) as u64
}

/// Refuses a URL that reaches PostgreSQL through a connection pooler in
/// transaction or statement pooling mode: two connections opened one after
/// the other that are served by the same server session (the same backend
/// pid) cannot be PostgreSQL's own, which gives each connection a backend
/// of its own. Such a pooler hands the last server session released to the
/// next client that asks (PgBouncer does by default). When the database
/// does not answer, nothing is checked: the runner starts and waits for it.
pub(crate) fn check_own_sessions(url: &str) -> Result<(), RunnerError> {
    #[derive(diesel::QueryableByName)]
    struct Pid {
        #[diesel(sql_type = diesel::sql_types::Integer)]
        pid: i32,
    }
    let pid = |conn: &mut PgConnection| {
        diesel::sql_query("SELECT pg_backend_pid() AS pid")
            .get_result::<Pid>(conn)
            .map(|row| row.pid)
            .ok()
    };
    let (Ok(mut first), Ok(mut second)) =
        (PgConnection::establish(url), PgConnection::establish(url))
    else {
        return Ok(());
    };
    for _ in 0..2 {
        if let (Some(a), Some(b)) = (pid(&mut first), pid(&mut second))
            && a == b
        {
            return Err(RunnerError::Config(format!(
                "database_url reaches PostgreSQL through a connection pooler in transaction or \
                 statement mode: two of the runner's connections were served by one server \
                 session (backend {a}). A runner keeps session state (LISTEN for wake-ups, \
                 prepared statements, session settings, advisory locks), so it needs sessions \
                 of its own: point it at PostgreSQL directly, or at a pool in session mode. \
                 Applications can enqueue through transaction pooling."
            )));
        }
    }
    Ok(())
}

/// Fails with [`jobqueue_core::Error::ReadOnly`] unless `conn`'s server
/// takes writes.
pub(crate) fn check_writable(conn: &mut PgConnection) -> Result<(), jobqueue_core::Error> {
    #[derive(diesel::QueryableByName)]
    struct ReadOnly {
        #[diesel(sql_type = diesel::sql_types::Text)]
        read_only: String,
    }
    let setting = diesel::sql_query("SELECT current_setting('transaction_read_only') AS read_only")
        .get_result::<ReadOnly>(conn)?;
    if setting.read_only == "on" {
        return Err(jobqueue_core::Error::ReadOnly);
    }
    Ok(())
}

/// The handler pool's connections: Diesel's, refused (and, once pooled,
/// discarded at checkout) when the server takes no writes, so handlers
/// get the primary after a failover instead of a standby or a fenced host.
///
/// Their sockets are noted with the runner's watchdog, which shuts them
/// down when it finds their server hung.
#[derive(Debug)]
pub(crate) struct HandlerConnections {
    hosts: Arc<HostOrder>,
    watchdog: Arc<Watchdog>,
}

impl HandlerConnections {
    pub(crate) fn new(hosts: Arc<HostOrder>, watchdog: Arc<Watchdog>) -> Self {
        HandlerConnections { hosts, watchdog }
    }
}

impl ManageConnection for HandlerConnections {
    type Connection = PgConnection;
    type Error = diesel::r2d2::Error;

    fn connect(&self) -> Result<PgConnection, Self::Error> {
        let mut conn = self.hosts.connect(|url| {
            let mut conn =
                PgConnection::establish(url).map_err(diesel::r2d2::Error::ConnectionError)?;
            self.is_valid(&mut conn)?;
            Ok::<_, diesel::r2d2::Error>(conn)
        })?;
        self.watchdog.add_handler_connection(&mut conn);
        Ok(conn)
    }

    fn is_valid(&self, conn: &mut PgConnection) -> Result<(), Self::Error> {
        check_writable(conn).map_err(|e| match e {
            jobqueue_core::Error::Database(e) => diesel::r2d2::Error::QueryError(e),
            other => diesel::r2d2::Error::QueryError(other.into()),
        })
    }

    fn has_broken(&self, conn: &mut PgConnection) -> bool {
        diesel::r2d2::R2D2Connection::is_broken(conn)
    }
}
