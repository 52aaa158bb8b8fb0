//! The listener: waits on `LISTEN jobqueue_jobs` and wakes the fetcher when a
//! job becomes available in one of this runner's queues.
//!
//! Diesel can only drain notifications that already arrived, so the listener
//! uses `tokio-postgres` on a single-threaded runtime of its own, which
//! waits on the socket: pickup latency is a round trip, not a poll interval.
//! After a reconnect it wakes the fetcher once, for notifications missed
//! while disconnected.
//!
//! It tries the URL's hosts in order, each within the connect timeout
//! (TCP connection, TLS, startup and the read-only check together: a frozen
//! server accepts the TCP connection and never answers), and keeps the
//! first that takes writes.
//!
//! The connection is checked every [`QUIET_CHECK`] without a notification,
//! and at once whenever another runner thread had to replace its own
//! connection (lost, or found read-only): the server must answer an empty
//! query within the runner's `db_timeout` and still take writes. A frozen
//! server, or a primary fenced off after a failover, would otherwise keep
//! the listener on a socket no notification comes through, and pickup
//! would fall back to the poll. A server in recovery refuses `LISTEN`, so
//! the listener never settles on a standby.

use std::sync::Arc;
use std::time::{Duration, Instant};

use crossbeam_channel::Receiver;
use postgres_openssl::MakeTlsConnector;
use tokio::runtime::Runtime;
use tokio::sync::mpsc;
use tokio_postgres::tls::MakeTlsConnect;
use tokio_postgres::{AsyncMessage, Client, Config, SimpleQueryMessage};

use crate::backoff::{Backoff, is_stopped, stopped_within};
use crate::claimer::Claimer;
use crate::health::{ConnectFailures, one_line};
use crate::host_order::HostOrder;
use crate::shared::Shared;

/// How often the listener looks up from its socket to check for shutdown.
const STOP_CHECK: Duration = Duration::from_millis(250);

/// How long a connection may stay quiet before the listener checks that
/// the server still answers.
const QUIET_CHECK: Duration = Duration::from_secs(5);

/// Where and how the listener connects: see `listener_tls`.
pub(crate) struct ListenerConnection {
    pub(crate) config: Config,
    pub(crate) tls: MakeTlsConnector,
    /// How long the server may take to answer a check.
    pub(crate) db_timeout: Duration,
}

/// What the connection's driver task passes on: a notification's payload,
/// or the end of the connection.
type Message = Result<String, String>;

pub(crate) fn run(
    shared: Arc<Shared>,
    claimer: &Claimer,
    stop: Receiver<()>,
    connection: ListenerConnection,
) {
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(e) => {
            log::error!("listener: cannot start its runtime ({e}); jobs are found by polling only");
            return;
        }
    };
    let mut backoff = Backoff::new();
    let mut failures = ConnectFailures::default();
    while !is_stopped(&stop) {
        let (client, mut messages) = match runtime.block_on(connect(&connection, &shared.hosts)) {
            Ok(connected) => connected,
            Err(e) => {
                failures.failed(&shared.health, "listener", &e);
                if stopped_within(&stop, backoff.next_delay()) {
                    break;
                }
                continue;
            }
        };
        backoff.reset();
        failures.connected(&shared.health);
        claimer.wake();
        let mut heard = Instant::now();
        let mut others_seen = others_replaced(&shared);
        loop {
            if is_stopped(&stop) {
                return;
            }
            // Another thread's connection was just ended or replaced (hung,
            // lost, or read-only): this one may be on the same server.
            let others = others_replaced(&shared);
            if heard.elapsed() >= QUIET_CHECK || others != others_seen {
                others_seen = others;
                if let Err(why) = runtime.block_on(still_primary(&client, connection.db_timeout)) {
                    log::warn!("listener: {why}; reconnecting");
                    break;
                }
                heard = Instant::now();
            }
            match next_message(&runtime, &mut messages) {
                Some(Ok(queue)) => {
                    heard = Instant::now();
                    if shared.config.queues.is_empty() || shared.config.queues.contains(&queue) {
                        if let Some(metrics) = &shared.metrics {
                            metrics.wakeups.inc();
                        }
                        claimer.announce(queue);
                    }
                }
                Some(Err(e)) => {
                    // Reconnect at once; only a failed connect is an outage.
                    log::info!("listener: connection lost ({e}); reconnecting");
                    break;
                }
                None => {}
            }
        }
    }
    log::debug!("listener stopped");
}

/// Connections of the runner's other threads ended (by the watchdog) or
/// replaced so far.
fn others_replaced(shared: &Shared) -> (u64, u64) {
    (shared.health.reconnects(), shared.watchdog.ended())
}

/// The next message within [`STOP_CHECK`], if any.
fn next_message(
    runtime: &Runtime,
    messages: &mut mpsc::UnboundedReceiver<Message>,
) -> Option<Message> {
    runtime.block_on(async {
        match tokio::time::timeout(STOP_CHECK, messages.recv()).await {
            Ok(Some(message)) => Some(message),
            Ok(None) => Some(Err("the connection ended".to_owned())),
            Err(_) => None,
        }
    })
}

/// Connects to the first of the URL's hosts, from the one that last took
/// a connection of any of the runner's threads on in the written order
/// (see `host_order`), that answers within the connect timeout and takes
/// writes, and listens on it; that host becomes the one the others try
/// first. The connection is driven by a task on the runtime that passes
/// notifications on.
async fn connect(
    connection: &ListenerConnection,
    order: &HostOrder,
) -> Result<(Client, mpsc::UnboundedReceiver<Message>), String> {
    let config = &connection.config;
    let hosts = config.get_hosts();
    if hosts.is_empty() {
        return Err("the database URL names no host".to_owned());
    }
    let limit = config
        .get_connect_timeout()
        .copied()
        .unwrap_or(connection.db_timeout);
    let mut reasons = Vec::new();
    let start = order.last_good() % hosts.len();
    for i in (0..hosts.len()).map(|k| (start + k) % hosts.len()) {
        let host = &hosts[i];
        let port = match config.get_ports() {
            [] => 5432,
            [port] => *port,
            ports => ports.get(i).copied().unwrap_or(5432),
        };
        let attempt = listen_on(connection, host, port, connection.db_timeout);
        match tokio::time::timeout(limit, attempt).await {
            Ok(Ok(connected)) => {
                order.set_last_good(i);
                return Ok(connected);
            }
            Ok(Err(e)) => reasons.push(format!("{}: {e}", describe(host, port))),
            Err(_) => reasons.push(format!(
                "{}: no answer within {:.1} s",
                describe(host, port),
                limit.as_secs_f64()
            )),
        }
    }
    Err(reasons.join("; "))
}

fn describe(host: &tokio_postgres::config::Host, port: u16) -> String {
    match host {
        tokio_postgres::config::Host::Tcp(name) => format!("{name}:{port}"),
        tokio_postgres::config::Host::Unix(path) => format!("{}:{port}", path.display()),
    }
}

/// One host: connection, startup, the read-only check and `LISTEN`.
async fn listen_on(
    connection: &ListenerConnection,
    host: &tokio_postgres::config::Host,
    port: u16,
    timeout: Duration,
) -> Result<(Client, mpsc::UnboundedReceiver<Message>), String> {
    use tokio_postgres::config::Host;
    let (tx, rx) = mpsc::unbounded_channel();
    let client = match host {
        Host::Tcp(name) => {
            let stream = tokio::net::TcpStream::connect((name.as_str(), port))
                .await
                .map_err(|e| e.to_string())?;
            let _ = stream.set_nodelay(true);
            let mut tls = connection.tls.clone();
            let tls =
                <MakeTlsConnector as MakeTlsConnect<tokio::net::TcpStream>>::make_tls_connect(
                    &mut tls, name,
                )
                .map_err(|e| e.to_string())?;
            let (client, conn) = connection
                .config
                .connect_raw(stream, tls)
                .await
                .map_err(|e| one_line(&e))?;
            tokio::spawn(drive(conn, tx));
            client
        }
        Host::Unix(dir) => {
            let path = dir.join(format!(".s.PGSQL.{port}"));
            let stream = tokio::net::UnixStream::connect(&path)
                .await
                .map_err(|e| format!("{}: {e}", path.display()))?;
            let (client, conn) = connection
                .config
                .connect_raw(stream, tokio_postgres::NoTls)
                .await
                .map_err(|e| one_line(&e))?;
            tokio::spawn(drive(conn, tx));
            client
        }
    };
    still_primary(&client, timeout).await?;
    Ok((client, rx))
}

/// Drives a connection, passing its notifications on until it ends.
async fn drive<S, T>(mut conn: tokio_postgres::Connection<S, T>, tx: mpsc::UnboundedSender<Message>)
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin,
    T: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin,
{
    loop {
        let message = std::future::poll_fn(|cx| conn.poll_message(cx)).await;
        let sent = match message {
            Some(Ok(AsyncMessage::Notification(n))) => tx.send(Ok(n.payload().to_owned())),
            Some(Ok(_)) => Ok(()),
            Some(Err(e)) => {
                let _ = tx.send(Err(one_line(&e)));
                return;
            }
            None => {
                let _ = tx.send(Err("the server closed the connection".to_owned()));
                return;
            }
        };
        if sent.is_err() {
            return;
        }
    }
}

/// Whether the listener's server answers within `timeout` and takes
/// writes, then (again) `LISTEN`: notifications come only from the
/// primary; a standby (which refuses `LISTEN` anyway) or a primary fenced
/// off after a failover (`default_transaction_read_only`) sends none.
/// Listening again on a channel is a no-op, and leaves `LISTEN` as the
/// session's last statement in `pg_stat_activity`.
async fn still_primary(client: &Client, timeout: Duration) -> Result<(), String> {
    let check = async {
        let answer = client
            .simple_query("SHOW transaction_read_only")
            .await
            .map_err(|e| format!("checking the server failed ({})", one_line(&e)))?;
        let read_only = answer.iter().any(|message| match message {
            SimpleQueryMessage::Row(row) => row.get(0) == Some("on"),
            _ => false,
        });
        if read_only {
            return Err("the server is read-only (fenced, or a standby)".to_owned());
        }
        client
            .batch_execute(&format!(
                "LISTEN \"{}\"",
                jobqueue_core::engine::NOTIFY_CHANNEL
            ))
            .await
            .map_err(|e| format!("LISTEN failed ({})", one_line(&e)))
    };
    tokio::time::timeout(timeout, check).await.map_err(|_| {
        format!(
            "the database did not answer within {:.1} s",
            timeout.as_secs_f64()
        )
    })?
}
