//! Connections that hang instead of failing.
//!
//! A server that stops answering without closing its connections (a
//! paused VM or process, a host gone behind a network that drops packets
//! without a reset) leaves a runner thread waiting on its socket for good:
//! libpq has no read timeout, TCP keepalives are answered by the kernel of
//! a host whose server process is frozen, and `tcp_user_timeout` only ends
//! a connection whose sent data goes unacknowledged. So each runner thread's
//! connection is watched: a round trip that takes longer than
//! `RunnerConfig::db_timeout` gets its socket shut down, which makes libpq
//! fail the call at once; the thread then reconnects (through the URL's
//! hosts, to whichever is the primary now).
//!
//! The socket is found by its address pair: the server reports the client
//! address and port it sees and its own, and the runner looks among its
//! own sockets for the one with those ends. Behind a proxy or a pooler the
//! pairs differ and nothing is watched (the pooler's own timeouts apply);
//! so it is over a Unix socket, where a frozen local server is not a
//! failover case.

use std::net::{IpAddr, SocketAddr};
use std::os::fd::RawFd;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};

use diesel::sql_types::{Integer, Nullable, Text};
use diesel::{PgConnection, QueryableByName, RunQueryDsl};
use nix::sys::socket::{Shutdown, SockaddrLike, SockaddrStorage, getpeername, getsockname};

use crate::sync::lock;

/// One thread's connection, as the watchdog sees it.
#[derive(Debug)]
pub(crate) struct Watched {
    role: &'static str,
    state: Mutex<State>,
}

#[derive(Debug, Default)]
struct State {
    /// The connection's socket, when found.
    socket: Option<Socket>,
    /// When the call in flight began, and how long it may take.
    call: Option<(Instant, Duration)>,
}

/// A TCP socket of this process, by descriptor and address pair.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Socket {
    fd: RawFd,
    local: SocketAddr,
    peer: SocketAddr,
}

impl Socket {
    /// Whether the descriptor still holds this connection (not closed and
    /// reused for another: the address pair of a live TCP connection is
    /// unique on the host).
    fn is_current(&self) -> bool {
        address(getsockname::<SockaddrStorage>(self.fd)) == Some(self.local)
            && address(getpeername::<SockaddrStorage>(self.fd)) == Some(self.peer)
    }
}

/// The watched connections of one runner, and its handlers' connections.
#[derive(Debug, Default)]
pub(crate) struct Watchdog {
    watched: Mutex<Vec<Weak<Watched>>>,
    /// Sockets of the handler pool's connections (and handlers' own): not
    /// watched call by call (a handler's use of its connection is its own),
    /// but shut down with the runner's when their server is found hung, so
    /// a handler waiting on a frozen primary fails instead of holding its
    /// job (whose lease the runner keeps renewing) for good.
    handler_sockets: Mutex<Vec<Socket>>,
    /// Runner connections it has ended, in all.
    ended: AtomicU64,
}

impl Watchdog {
    /// Watches the connection of thread `role` from now on (see [`Watched`]).
    pub(crate) fn watch(&self, role: &'static str) -> Arc<Watched> {
        let watched = Arc::new(Watched {
            role,
            state: Mutex::new(State::default()),
        });
        let mut all = lock(&self.watched);
        all.retain(|w| w.strong_count() > 0);
        all.push(Arc::downgrade(&watched));
        watched
    }

    /// Shuts down the socket of every call in flight for longer than it
    /// may take.
    pub(crate) fn check(&self) {
        let all: Vec<Arc<Watched>> = lock(&self.watched)
            .iter()
            .filter_map(Weak::upgrade)
            .collect();
        let now = Instant::now();
        for watched in all {
            let mut state = lock(&watched.state);
            let (Some(socket), Some((since, limit))) = (state.socket, state.call) else {
                continue;
            };
            if now.duration_since(since) < limit {
                continue;
            }
            // Under the state's lock: the thread cannot end the call and
            // drop the connection (closing the descriptor) meanwhile.
            state.call = None;
            state.socket = None;
            self.shut_handler_sockets(socket.peer);
            match nix::sys::socket::shutdown(socket.fd, Shutdown::Both) {
                Ok(()) => {
                    self.ended.fetch_add(1, Ordering::Relaxed);
                    log::warn!(
                        "{}: the database did not answer within {:.1} s; closed the connection \
                         (it reconnects through the URL's hosts)",
                        watched.role,
                        limit.as_secs_f64()
                    );
                }
                Err(e) => log::debug!("{}: shutting down a hung socket: {e}", watched.role),
            }
        }
    }

    /// Runner connections it has ended so far: the listener checks its own
    /// connection when this changes.
    pub(crate) fn ended(&self) -> u64 {
        self.ended.load(Ordering::Relaxed)
    }

    /// Notes a handler connection's socket (see `handler_sockets`).
    pub(crate) fn add_handler_connection(&self, conn: &mut PgConnection) {
        let Some(socket) = socket_of(conn) else {
            return;
        };
        let mut sockets = lock(&self.handler_sockets);
        // Connections closed since are forgotten now and then.
        if sockets.len() >= 64 {
            sockets.retain(Socket::is_current);
        }
        sockets.push(socket);
    }

    /// The server of `watched`'s connection stopped taking writes (a
    /// primary fenced off, or demoted to a standby): shuts down the handler
    /// connections to it too. A handler's transaction there can only fail,
    /// or, begun before the fence, wait for good at its commit for a
    /// synchronous standby that was promoted away, holding its job (whose
    /// lease the runner keeps renewing).
    pub(crate) fn server_read_only(&self, watched: &Watched) {
        let peer = lock(&watched.state).socket.map(|socket| socket.peer);
        if let Some(peer) = peer {
            self.shut_handler_sockets(peer);
        }
    }

    /// Shuts down the handler connections to `server`.
    fn shut_handler_sockets(&self, server: SocketAddr) {
        let mut sockets = lock(&self.handler_sockets);
        let mut shut = 0;
        sockets.retain(|socket| {
            if socket.peer != server {
                return true;
            }
            if socket.is_current() && nix::sys::socket::shutdown(socket.fd, Shutdown::Both).is_ok()
            {
                shut += 1;
            }
            false
        });
        if shut > 0 {
            log::warn!("closed {shut} handler connections to the same server");
        }
    }
}

/// How often the watchdog looks at the calls in flight.
const CHECK_EVERY: Duration = Duration::from_millis(250);

/// The watchdog thread: checks every [`CHECK_EVERY`] until `stop`
/// disconnects.
pub(crate) fn run(watchdog: &Watchdog, stop: &crossbeam_channel::Receiver<()>) {
    while !crate::backoff::stopped_within(stop, CHECK_EVERY) {
        watchdog.check();
    }
}

impl Watched {
    /// The connection is now `conn` (found by its address pair), or none.
    pub(crate) fn set_connection(&self, conn: Option<&mut PgConnection>) {
        let socket = conn.and_then(socket_of);
        let mut state = lock(&self.state);
        state.socket = socket;
        state.call = None;
    }

    /// A call that may take up to `limit` begins; it ends when the guard
    /// is dropped.
    pub(crate) fn begin(&self, limit: Duration) -> CallGuard<'_> {
        lock(&self.state).call = Some((Instant::now(), limit));
        CallGuard { watched: self }
    }
}

/// A call in flight on a watched connection.
pub(crate) struct CallGuard<'a> {
    watched: &'a Watched,
}

impl Drop for CallGuard<'_> {
    fn drop(&mut self) {
        lock(&self.watched.state).call = None;
    }
}

#[derive(QueryableByName)]
struct Ends {
    #[diesel(sql_type = Nullable<Text>)]
    client_addr: Option<String>,
    #[diesel(sql_type = Nullable<Integer>)]
    client_port: Option<i32>,
    #[diesel(sql_type = Nullable<Text>)]
    server_addr: Option<String>,
    #[diesel(sql_type = Nullable<Integer>)]
    server_port: Option<i32>,
}

/// `conn`'s TCP socket: the one of this process whose local and peer
/// addresses are the ends the server reports.
fn socket_of(conn: &mut PgConnection) -> Option<Socket> {
    let ends = diesel::sql_query(
        "SELECT host(inet_client_addr()) AS client_addr, inet_client_port() AS client_port,
                host(inet_server_addr()) AS server_addr, inet_server_port() AS server_port",
    )
    .get_result::<Ends>(conn)
    .ok()?;
    let end = |addr: Option<String>, port: Option<i32>| -> Option<SocketAddr> {
        let ip: IpAddr = addr?.parse().ok()?;
        Some(SocketAddr::new(ip, u16::try_from(port?).ok()?))
    };
    let local = end(ends.client_addr, ends.client_port)?;
    let peer = end(ends.server_addr, ends.server_port)?;
    std::fs::read_dir("/proc/self/fd")
        .ok()?
        .flatten()
        .filter_map(|entry| entry.file_name().to_str()?.parse::<RawFd>().ok())
        .map(|fd| Socket { fd, local, peer })
        .find(Socket::is_current)
}

/// An IPv4 or IPv6 socket address (IPv4-mapped IPv6 addresses as IPv4, as
/// the server reports them).
fn address(addr: nix::Result<SockaddrStorage>) -> Option<SocketAddr> {
    let addr = addr.ok()?;
    match addr.family()? {
        nix::sys::socket::AddressFamily::Inet => {
            let v4 = addr.as_sockaddr_in()?;
            Some(SocketAddr::new(IpAddr::V4(v4.ip()), v4.port()))
        }
        nix::sys::socket::AddressFamily::Inet6 => {
            let v6 = addr.as_sockaddr_in6()?;
            let ip = v6.ip();
            let ip = ip.to_ipv4_mapped().map_or(IpAddr::V6(ip), IpAddr::V4);
            Some(SocketAddr::new(ip, v6.port()))
        }
        _ => None,
    }
}
