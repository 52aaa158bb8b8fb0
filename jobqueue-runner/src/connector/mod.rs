//! Every connection the runner opens is made here, whatever its kind: the
//! runner threads' queue sessions (`db`), the handler pool's and handlers'
//! own connections (`handler`), the queue gauges' connection, the startup
//! check for a pooler, and the listener's `tokio-postgres` connection
//! (`listen`).
//!
//! For each, the connector
//!
//! - reads the URL as libpq does, in either form, with the runner's
//!   defaults for a dead or frozen server (`url`) and the same TLS
//!   settings for the listener (`tls`);
//! - tries its hosts from the one that took the last connection (`hosts`);
//! - bounds each attempt: libpq's connect timeout its TCP connection and
//!   startup, the watchdog what follows (`hang_guard`), and none is started
//!   that could outlast the runner's stop deadline;
//! - sets the session up and refuses a server that takes no writes
//!   ([`jobqueue_core::Error::ReadOnly`]), as `target_session_attrs=read-write`
//!   would, whatever the URL says;
//! - and hands the connection over watched by the watchdog, from its first
//!   packet until it is dropped.
//!
//! What the sessions run is `jobqueue_core::engine::connection`'s.

mod handler;
mod hosts;
mod listen;
mod tls;
mod url;

use std::net::{IpAddr, SocketAddr, ToSocketAddrs};
use std::sync::Arc;
use std::time::{Duration, Instant};

use diesel::{Connection, PgConnection};
use jobqueue_core::engine::QueueSession;

pub(crate) use handler::HandlerConnections;
pub(crate) use listen::{Listening, Message, still_primary};

use crate::RunnerError;
use crate::hang_guard::{Guarded, Owner, Socket, Watchdog, Watched};
use hosts::HostOrder;

/// The longest a runner thread's own connection may sit idle inside a
/// transaction. Its transactions last milliseconds; one stays open only if
/// the process froze inside it (SIGSTOP, a paused VM, a swap storm), and its
/// row locks would then keep every other runner's recovery (which skips
/// locked rows) off its jobs until it resumes. The server ends such a
/// session after this long, releasing the locks.
const IDLE_IN_TRANSACTION_TIMEOUT: Duration = Duration::from_secs(5);

/// Makes the runner's connections (see the module documentation).
pub(crate) struct Connector {
    hosts: HostOrder,
    /// For each of `hosts`' URLs, the hosts it connects to, by which an
    /// attempt is watched.
    targets: Vec<Vec<Target>>,
    /// The listener's settings.
    listen: tls::ListenSettings,
    /// How long a call may take (`RunnerConfig::db_timeout`).
    db_timeout: Duration,
    /// libpq's connect timeout per host, as the URL sets it.
    connect_timeout: Duration,
    watchdog: Arc<Watchdog>,
}

impl std::fmt::Debug for Connector {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Connector")
            .field("hosts", &self.hosts.len())
            .field("db_timeout", &self.db_timeout)
            .finish_non_exhaustive()
    }
}

/// A host a URL connects to, as the watchdog finds its sockets.
#[derive(Debug, Clone)]
enum Target {
    /// A host name or address, and port.
    Tcp(String, u16),
    /// An address given as `hostaddr`, and port.
    Addr(IpAddr, u16),
}

impl Connector {
    /// The connector for `url` (either form), whose calls may take up to
    /// `db_timeout`, its connections watched by `watchdog`. Fails on a URL
    /// the listener cannot read, or whose TLS settings it cannot honour:
    /// refused at the start, not retried forever.
    pub(crate) fn new(
        url: &str,
        db_timeout: Duration,
        watchdog: Arc<Watchdog>,
    ) -> Result<Self, RunnerError> {
        let url = url::with_defaults(url, db_timeout)?;
        let listen = tls::listen_settings(&url)?;
        let hosts = HostOrder::new(&url);
        let all = targets(&listen.config);
        let targets = if hosts.len() == all.len() {
            all.into_iter()
                .map(|target| target.into_iter().collect())
                .collect()
        } else {
            vec![all.into_iter().flatten().collect()]
        };
        // libpq takes 2 s at least; none (0) is taken as the database timeout.
        let connect_timeout = listen
            .config
            .get_connect_timeout()
            .copied()
            .unwrap_or(db_timeout)
            .max(Duration::from_secs(2));
        Ok(Connector {
            hosts,
            targets,
            listen,
            db_timeout,
            connect_timeout,
            watchdog,
        })
    }

    /// How long a call may take before the watchdog ends its connection.
    pub(crate) fn db_timeout(&self) -> Duration {
        self.db_timeout
    }

    /// A queue session for runner thread `role`: the server ends it once
    /// it sits idle in a transaction (see [`IDLE_IN_TRANSACTION_TIMEOUT`]).
    pub(crate) fn queue_session(
        &self,
        role: &'static str,
    ) -> jobqueue_core::Result<Guarded<QueueSession>> {
        self.connect(role, Owner::Runner, |mut conn| {
            jobqueue_core::engine::connection::set_up_worker_session(
                &mut conn,
                IDLE_IN_TRANSACTION_TIMEOUT,
            )?;
            QueueSession::new(conn)
        })
    }

    /// A connection for handlers (the handler pool's, or a handler's own).
    pub(crate) fn handler_connection(&self) -> jobqueue_core::Result<Guarded<PgConnection>> {
        self.connect("handler connection", Owner::Handler, writable)
    }

    /// A connection of the runner's own for `role`, to the server that
    /// takes writes, without a session set up for the queue (the queue
    /// gauges').
    pub(crate) fn service_connection(
        &self,
        role: &'static str,
    ) -> jobqueue_core::Result<Guarded<PgConnection>> {
        self.connect(role, Owner::Runner, writable)
    }

    /// Refuses a URL that reaches PostgreSQL through a connection pooler in
    /// transaction or statement pooling mode: two connections opened one
    /// after the other that are served by the same server session (the
    /// same backend pid) cannot be PostgreSQL's own, which gives each
    /// connection a backend of its own. Such a pooler hands the last server
    /// session released to the next client that asks (PgBouncer does by
    /// default). When the database does not answer, nothing is checked: the
    /// runner starts and waits for it.
    pub(crate) fn check_own_sessions(&self) -> Result<(), RunnerError> {
        let connect = || self.connect("startup check", Owner::Runner, Ok);
        let (Ok(mut first), Ok(mut second)) = (connect(), connect()) else {
            return Ok(());
        };
        let pid = |conn: &mut Guarded<PgConnection>| {
            conn.call(
                Some(self.db_timeout),
                jobqueue_core::engine::connection::backend_pid,
            )
            .ok()
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

    /// Applies the queue settings the registry declares (see
    /// `maintenance/declare_queues.rs`), before any claim; false when the
    /// database did not answer: the maintenance applies them once it does.
    pub(crate) fn declare_queues(
        &self,
        queues: &[jobqueue_core::QueueConfig],
    ) -> Result<bool, RunnerError> {
        if queues.is_empty() {
            return Ok(true);
        }
        let Ok(mut conn) = self.connect("queue declarations", Owner::Runner, Ok) else {
            return Ok(false);
        };
        let applied = conn.call(Some(self.db_timeout), |conn| {
            jobqueue_core::declare_queues(conn, queues)
        })?;
        if !applied.is_empty() {
            log::info!(
                "applied the queue settings the code declares anew: {}",
                applied.join(", ")
            );
        }
        Ok(true)
    }

    /// Refuses to start against a database whose jobqueue schema is
    /// missing or behind this library (its first statement would fail, or
    /// worse, half work). When the database does not answer, nothing is
    /// checked: the runner starts and waits for it.
    pub(crate) fn check_schema(&self) -> Result<(), RunnerError> {
        let Ok(mut conn) = self.connect("schema check", Owner::Runner, Ok) else {
            return Ok(());
        };
        let pending = conn.call(Some(self.db_timeout), jobqueue_core::pending_migrations)?;
        if pending.is_empty() {
            Ok(())
        } else {
            Err(RunnerError::Schema(pending))
        }
    }

    /// Connects through the hosts in turn (see [`HostOrder`]) until one
    /// connects and `set_up` succeeds on it (as a call limited to the
    /// database timeout), and hands the result over watched as `role`'s.
    fn connect<T>(
        &self,
        role: &'static str,
        owner: Owner,
        set_up: impl Fn(PgConnection) -> jobqueue_core::Result<T>,
    ) -> jobqueue_core::Result<Guarded<T>> {
        self.hosts.connect(|index, url| {
            if owner == Owner::Runner && !self.time_left_for(self.connect_timeout) {
                return Err(stopping());
            }
            let watched = self.watchdog.watch(role, owner);
            let conn = self.establish(index, url, &watched)?;
            let value = {
                let _call = watched.begin(Some(self.db_timeout));
                set_up(conn)?
            };
            Ok(Guarded::new(value, watched))
        })
    }

    /// libpq's connection to `url` (the `index`th of the hosts), found
    /// among this process's sockets for `watched`, all within the connect
    /// timeout plus the database timeout.
    fn establish(
        &self,
        index: usize,
        url: &str,
        watched: &Watched,
    ) -> jobqueue_core::Result<PgConnection> {
        let addresses = self.targets.get(index).map_or_else(Vec::new, |targets| {
            targets.iter().flat_map(Target::addresses).collect()
        });
        let _attempt = watched.begin_attempt(addresses, self.connect_timeout + self.db_timeout);
        let mut conn = PgConnection::establish(url)?;
        let ends = jobqueue_core::engine::connection::session_ends(&mut conn)?;
        watched.set_socket(ends.and_then(|ends| Socket::find(ends.client, ends.server)));
        Ok(conn)
    }

    /// Whether an attempt that takes `attempt` would end before the
    /// runner's stop deadline (always, before it is told to stop).
    fn time_left_for(&self, attempt: Duration) -> bool {
        self.watchdog
            .stop_deadline()
            .is_none_or(|deadline| Instant::now() + attempt <= deadline)
    }
}

/// `conn`, if its server takes writes.
fn writable(mut conn: PgConnection) -> jobqueue_core::Result<PgConnection> {
    jobqueue_core::engine::connection::check_writable(&mut conn)?;
    Ok(conn)
}

/// The error of an attempt the connector does not start: the runner is
/// stopping, and the attempt could outlast its deadline.
fn stopping() -> jobqueue_core::Error {
    jobqueue_core::Error::Connection(diesel::ConnectionError::BadConnection(
        "the runner is stopping: no time is left for a connection attempt".to_owned(),
    ))
}

/// The hosts and ports `config` connects to, in its order (`None` for a
/// Unix socket).
fn targets(config: &tokio_postgres::Config) -> Vec<Option<Target>> {
    let ports = config.get_ports();
    let addrs = config.get_hostaddrs();
    config
        .get_hosts()
        .iter()
        .enumerate()
        .map(|(i, host)| {
            let port = match ports {
                [] => 5432,
                [port] => *port,
                ports => ports.get(i).copied().unwrap_or(5432),
            };
            if let Some(addr) = addrs.get(i) {
                return Some(Target::Addr(*addr, port));
            }
            match host {
                tokio_postgres::config::Host::Tcp(name) => Some(Target::Tcp(name.clone(), port)),
                tokio_postgres::config::Host::Unix(_) => None,
            }
        })
        .collect()
}

impl Target {
    /// The addresses a connection to it may have as its peer (a name
    /// resolved now, as libpq resolves it); none if it does not resolve.
    fn addresses(&self) -> Vec<SocketAddr> {
        let normal = |addr: SocketAddr| match addr.ip() {
            IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
                Some(v4) => SocketAddr::new(IpAddr::V4(v4), addr.port()),
                None => addr,
            },
            IpAddr::V4(_) => addr,
        };
        match self {
            Target::Addr(ip, port) => vec![normal(SocketAddr::new(*ip, *port))],
            Target::Tcp(name, port) => (name.as_str(), *port)
                .to_socket_addrs()
                .map(|addrs| addrs.map(normal).collect())
                .unwrap_or_default(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn targets_of(url: &str) -> Vec<String> {
        let connector = Connector::new(url, Duration::from_secs(2), Arc::default()).expect("valid");
        connector
            .targets
            .iter()
            .map(|targets| format!("{targets:?}"))
            .collect()
    }

    #[test]
    fn each_hosts_attempt_is_watched_by_that_hosts_address() {
        assert_eq!(
            targets_of("postgres://u@a.example:5432,b.example:5433/db"),
            [r#"[Tcp("a.example", 5432)]"#, r#"[Tcp("b.example", 5433)]"#]
        );
        assert_eq!(
            targets_of("host=/run/postgresql,b.example port=5432,5433 dbname=db"),
            ["[]", r#"[Tcp("b.example", 5433)]"#]
        );
        // Not split (`hostaddr` in key=value form): libpq tries them all.
        assert_eq!(
            targets_of("host=a,b hostaddr=10.0.0.7,10.0.0.8 port=1,2 dbname=db"),
            ["[Addr(10.0.0.7, 1), Addr(10.0.0.8, 2)]"]
        );
    }
}
