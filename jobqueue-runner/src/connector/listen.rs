//! The listener's connection: `tokio-postgres` (Diesel can only drain
//! notifications that already arrived; this one waits on its socket), to
//! the first of the URL's hosts, from the one that took the last
//! connection of any kind, that answers within the connect timeout (TCP
//! connection, TLS, startup and the checks together: a frozen server
//! accepts the TCP connection and never answers) and takes writes; then
//! `LISTEN`. The TLS settings are the URL's (`tls`).

use std::time::{Duration, Instant};

use postgres_openssl::MakeTlsConnector;
use tokio::sync::mpsc;
use tokio_postgres::config::Host;
use tokio_postgres::tls::MakeTlsConnect;
use tokio_postgres::{AsyncMessage, Client, SimpleQueryMessage};

use super::Connector;
use crate::health::one_line;

/// What the connection's driver task passes on: a notification's payload,
/// or the end of the connection.
pub(crate) type Message = Result<String, String>;

/// A connection listening for the wake-ups of enqueues.
pub(crate) struct Listening {
    /// The connection, for checks ([`still_primary`]).
    pub(crate) client: Client,
    /// Its notifications, passed on by a task of the runtime it was made on.
    pub(crate) messages: mpsc::UnboundedReceiver<Message>,
}

impl Connector {
    /// Connects the listener (see the module documentation), on the
    /// runtime it is awaited on, which drives the connection. No host is
    /// tried once the runner's stop deadline is too close for it.
    pub(crate) async fn listen(&self) -> Result<Listening, String> {
        let config = &self.listen.config;
        let hosts = config.get_hosts();
        if hosts.is_empty() {
            return Err("the database URL names no host".to_owned());
        }
        let mut reasons = Vec::new();
        let start = self.hosts.last_good() % hosts.len();
        for i in (0..hosts.len()).map(|k| (start + k) % hosts.len()) {
            let host = &hosts[i];
            let port = match config.get_ports() {
                [] => 5432,
                [port] => *port,
                ports => ports.get(i).copied().unwrap_or(5432),
            };
            let Some(limit) = self.attempt_limit(self.connect_timeout) else {
                reasons.push("the runner is stopping".to_owned());
                break;
            };
            match tokio::time::timeout(limit, self.listen_on(host, port)).await {
                Ok(Ok(connected)) => {
                    self.hosts.set_last_good(i);
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

    /// How long an attempt may take: `limit`, or less when the runner's
    /// stop deadline comes first; `None` when it has passed.
    fn attempt_limit(&self, limit: Duration) -> Option<Duration> {
        match self.watchdog.stop_deadline() {
            None => Some(limit),
            Some(deadline) => {
                let left = deadline.checked_duration_since(Instant::now())?;
                Some(limit.min(left))
            }
        }
    }

    /// One host: connection, startup, the read-only check and `LISTEN`.
    async fn listen_on(&self, host: &Host, port: u16) -> Result<Listening, String> {
        let (tx, messages) = mpsc::unbounded_channel();
        let config = &self.listen.config;
        let client = match host {
            Host::Tcp(name) => {
                let stream = tokio::net::TcpStream::connect((name.as_str(), port))
                    .await
                    .map_err(|e| e.to_string())?;
                let _ = stream.set_nodelay(true);
                let mut tls = self.listen.tls.clone();
                let tls =
                    <MakeTlsConnector as MakeTlsConnect<tokio::net::TcpStream>>::make_tls_connect(
                        &mut tls, name,
                    )
                    .map_err(|e| e.to_string())?;
                let (client, conn) = config
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
                let (client, conn) = config
                    .connect_raw(stream, tokio_postgres::NoTls)
                    .await
                    .map_err(|e| one_line(&e))?;
                tokio::spawn(drive(conn, tx));
                client
            }
        };
        still_primary(&client, self.db_timeout).await?;
        Ok(Listening { client, messages })
    }
}

fn describe(host: &Host, port: u16) -> String {
    match host {
        Host::Tcp(name) => format!("{name}:{port}"),
        Host::Unix(path) => format!("{}:{port}", path.display()),
    }
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
pub(crate) async fn still_primary(client: &Client, timeout: Duration) -> Result<(), String> {
    let check = async {
        let answer = client
            .simple_query(jobqueue_core::engine::connection::READ_ONLY_QUERY)
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
            .batch_execute(jobqueue_core::engine::connection::LISTEN)
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
