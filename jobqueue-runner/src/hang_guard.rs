//! Connections that hang instead of failing, and the runner's deadline to
//! stop.
//!
//! A server that stops answering without closing its connections (a
//! paused VM or process, a host gone behind a network that drops packets
//! without a reset) leaves a thread waiting on its socket for good: libpq
//! has no read timeout, TCP keepalives are answered by the kernel of a host
//! whose server process is frozen, and `tcp_user_timeout` only ends a
//! connection whose sent data goes unacknowledged. So every connection the
//! runner makes (`connector`) is watched, from its first packet on, and
//! the watchdog shuts down sockets, which makes libpq fail the call on them
//! at once:
//!
//! - a call that takes longer than its limit (`RunnerConfig::db_timeout`)
//!   means its server hangs: every connection to that server is shut down
//!   (the runner threads', in calls without a limit such as a `VACUUM`
//!   too, the handlers', the queue gauges'), and each thread reconnects
//!   through the URL's hosts to whichever is the primary now;
//! - so does a connection attempt that outlasts its connect timeout plus
//!   the database timeout: libpq bounds its own part (TCP connection,
//!   startup, `target_session_attrs`) by the connect timeout, but not what
//!   follows (Diesel's and the runner's session setup, finding the
//!   socket), so the sockets opened since the attempt began, to the
//!   addresses it connects to, are shut down;
//! - once the runner is told to stop, [`Watchdog::stop_by`] sets when it
//!   must be done: the grace period plus the database timeout. Past that,
//!   every connection of the runner's own threads is shut down, whatever
//!   it waits on (a call without a limit, a server that hangs), and the
//!   connector starts no attempt that could outlast it. Handler
//!   connections are left to their handlers.
//!
//! A socket is found by its address pair: the server reports the client
//! address and port it sees and its own, and the runner looks among its
//! own sockets for the one with those ends. Behind a proxy or a pooler the
//! pairs differ and nothing is found (the pooler's own timeouts apply);
//! so it is over a Unix socket, where a frozen local server is not a
//! failover case.

use std::net::{IpAddr, SocketAddr};
use std::os::fd::RawFd;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock, Weak};
use std::time::{Duration, Instant};

use nix::sys::socket::{Shutdown, SockaddrLike, SockaddrStorage, getpeername, getsockname};

use crate::sync::lock;

/// Whose a connection is, which decides whether the runner's stop
/// deadline ends it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Owner {
    /// One of the runner's own threads: ended at the stop deadline.
    Runner,
    /// A handler's (pooled or its own): its use is the handler's, and a
    /// handler still running at the deadline was abandoned to it.
    Handler,
}

/// One connection, as the watchdog sees it.
#[derive(Debug)]
pub(crate) struct Watched {
    role: &'static str,
    owner: Owner,
    state: Mutex<State>,
}

#[derive(Debug, Default)]
struct State {
    /// The connection's socket, once found.
    socket: Option<Socket>,
    /// The call in flight, if any.
    call: Option<Call>,
    /// The connection attempt in progress, if any.
    attempt: Option<Attempt>,
}

#[derive(Debug, Clone, Copy)]
struct Call {
    since: Instant,
    /// How long it may take: `None` for as long as the runner runs.
    limit: Option<Duration>,
}

/// A connection attempt whose socket is not known yet.
#[derive(Debug)]
struct Attempt {
    since: Instant,
    limit: Duration,
    /// The addresses it connects to.
    targets: Vec<SocketAddr>,
    /// This process's sockets to `targets` when it began: its own is none
    /// of them (a descriptor number may be reused; its ends tell).
    before: Vec<Socket>,
}

/// A TCP socket of this process, by descriptor and address pair.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Socket {
    fd: RawFd,
    local: SocketAddr,
    peer: SocketAddr,
}

impl Socket {
    /// The socket of this process whose ends are `local` and `peer`.
    pub(crate) fn find(local: SocketAddr, peer: SocketAddr) -> Option<Socket> {
        descriptors()
            .into_iter()
            .map(|fd| Socket { fd, local, peer })
            .find(Socket::is_current)
    }

    /// Whether the descriptor still holds this connection (not closed and
    /// reused for another: the address pair of a live TCP connection is
    /// unique on the host).
    fn is_current(&self) -> bool {
        address(getsockname::<SockaddrStorage>(self.fd)) == Some(self.local)
            && address(getpeername::<SockaddrStorage>(self.fd)) == Some(self.peer)
    }

    /// Shuts the connection down (both ways), if the descriptor still
    /// holds it.
    fn shut(&self) -> bool {
        self.is_current() && nix::sys::socket::shutdown(self.fd, Shutdown::Both).is_ok()
    }
}

/// Every connection the runner made and still has, and its deadline to
/// stop.
#[derive(Debug, Default)]
pub(crate) struct Watchdog {
    watched: Mutex<Vec<Weak<Watched>>>,
    /// When the runner must be done, once it is told to stop.
    stop_by: OnceLock<Instant>,
    /// Connections it has ended because their server hung, in all.
    ended: AtomicU64,
}

impl Watchdog {
    /// Watches a new connection of `role` from now on: its attempt, then
    /// its calls (see [`Watched`]), until it is dropped.
    pub(crate) fn watch(&self, role: &'static str, owner: Owner) -> Arc<Watched> {
        let watched = Arc::new(Watched {
            role,
            owner,
            state: Mutex::new(State::default()),
        });
        let mut all = lock(&self.watched);
        all.retain(|w| w.strong_count() > 0);
        all.push(Arc::downgrade(&watched));
        watched
    }

    /// The runner must be done by `deadline` (set once, when it is told to
    /// stop).
    pub(crate) fn stop_by(&self, deadline: Instant) {
        let _ = self.stop_by.set(deadline);
    }

    /// When the runner must be done, once it was told to stop.
    pub(crate) fn stop_deadline(&self) -> Option<Instant> {
        self.stop_by.get().copied()
    }

    /// Connections it has ended because their server hung, so far: the
    /// listener checks its own connection when this changes.
    pub(crate) fn ended(&self) -> u64 {
        self.ended.load(Ordering::Relaxed)
    }

    /// Ends what overran: the connections to a server that left a call or
    /// an attempt unanswered past its limit, and, past the stop deadline,
    /// every connection of the runner's own threads.
    pub(crate) fn check(&self) {
        let all: Vec<Arc<Watched>> = lock(&self.watched)
            .iter()
            .filter_map(Weak::upgrade)
            .collect();
        let now = Instant::now();
        let stopped = self.stop_by.get().is_some_and(|at| now >= *at);
        let mut hung = Vec::new();
        for watched in &all {
            hung.extend(watched.overdue(now, stopped));
        }
        let (mut hung_closed, mut stop_closed) = (0, 0);
        for watched in &all {
            let mut state = lock(&watched.state);
            let Some(socket) = state.socket else {
                continue;
            };
            let server_hung = hung.contains(&socket.peer);
            let past_stop = stopped && watched.owner == Owner::Runner;
            if !(server_hung || past_stop) {
                continue;
            }
            // Under the state's lock: its owner cannot drop the connection
            // (closing the descriptor) meanwhile.
            state.socket = None;
            state.call = None;
            if !socket.shut() {
                continue;
            }
            if server_hung {
                self.ended.fetch_add(1, Ordering::Relaxed);
                hung_closed += 1;
            } else {
                stop_closed += 1;
            }
        }
        if hung_closed > 1 {
            log::warn!("closed {hung_closed} connections to a server that does not answer");
        }
        if stop_closed > 0 {
            log::warn!(
                "the runner's time to stop ran out: closed {stop_closed} of its connections \
                 still open"
            );
        }
    }

    /// The server of `watched`'s connection stopped taking writes (a
    /// primary fenced off, or demoted to a standby): shuts down the handler
    /// connections to it. A handler's transaction there can only fail,
    /// or, begun before the fence, wait for good at its commit for a
    /// synchronous standby that was promoted away, holding its job (whose
    /// lease the runner keeps renewing). The runner's threads find out on
    /// their own, at their next statement.
    pub(crate) fn server_read_only(&self, watched: &Watched) {
        let Some(server) = lock(&watched.state).socket.map(|socket| socket.peer) else {
            return;
        };
        let all: Vec<Arc<Watched>> = lock(&self.watched)
            .iter()
            .filter_map(Weak::upgrade)
            .collect();
        let mut shut = 0;
        for handler in all.iter().filter(|w| w.owner == Owner::Handler) {
            let mut state = lock(&handler.state);
            if let Some(socket) = state.socket.filter(|socket| socket.peer == server) {
                state.socket = None;
                state.call = None;
                if socket.shut() {
                    shut += 1;
                }
            }
        }
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
    /// The connection's socket is now `socket`, or unknown.
    pub(crate) fn set_socket(&self, socket: Option<Socket>) {
        let mut state = lock(&self.state);
        state.socket = socket;
        state.call = None;
    }

    /// A call that may take up to `limit` (`None`: as long as the runner
    /// runs) begins; it ends when the guard is dropped.
    pub(crate) fn begin(&self, limit: Option<Duration>) -> CallGuard<'_> {
        lock(&self.state).call = Some(Call {
            since: Instant::now(),
            limit,
        });
        CallGuard { watched: self }
    }

    /// A connection attempt to `targets` that may take up to `limit` until
    /// its socket is known ([`Watched::set_socket`]) begins; it ends when
    /// the guard is dropped. Without targets (a Unix socket, a name that
    /// does not resolve) it is not watched.
    pub(crate) fn begin_attempt(
        &self,
        targets: Vec<SocketAddr>,
        limit: Duration,
    ) -> AttemptGuard<'_> {
        if !targets.is_empty() {
            let before = sockets_to(&targets);
            lock(&self.state).attempt = Some(Attempt {
                since: Instant::now(),
                limit,
                targets,
                before,
            });
        }
        AttemptGuard { watched: self }
    }

    /// Ends this connection's call or attempt if it overran: returns the
    /// servers found hung (a call or an attempt past its own limit; one
    /// only past the stop deadline says nothing about its server).
    fn overdue(&self, now: Instant, stopped: bool) -> Vec<SocketAddr> {
        let stops = stopped && self.owner == Owner::Runner;
        let mut state = lock(&self.state);
        let mut hung = Vec::new();
        if let (Some(call), Some(socket)) = (state.call, state.socket) {
            let over = call
                .limit
                .filter(|limit| now.duration_since(call.since) >= *limit);
            if let Some(limit) = over {
                log::warn!(
                    "{}: the database did not answer within {:.1} s; closed the connection \
                     (it reconnects through the URL's hosts)",
                    self.role,
                    limit.as_secs_f64()
                );
                hung.push(socket.peer);
            }
            if over.is_some() || stops {
                // Shut down by the caller, with every other one to the server.
                state.call = None;
            }
        }
        let over = state
            .attempt
            .as_ref()
            .is_some_and(|a| now.duration_since(a.since) >= a.limit);
        if (over || stops)
            && let Some(attempt) = state.attempt.take()
        {
            if over {
                log::warn!(
                    "{}: the database did not finish setting up a connection within {:.1} s; \
                     closed it (it tries the URL's next host)",
                    self.role,
                    attempt.limit.as_secs_f64()
                );
                hung.extend(&attempt.targets);
            }
            shut_new_sockets(&attempt);
        }
        hung
    }
}

/// Shuts down the sockets to `attempt`'s targets opened since it began.
fn shut_new_sockets(attempt: &Attempt) {
    for socket in sockets_to(&attempt.targets) {
        if !attempt.before.contains(&socket) {
            let _ = nix::sys::socket::shutdown(socket.fd, Shutdown::Both);
        }
    }
}

/// This process's TCP sockets connected to one of `targets`.
fn sockets_to(targets: &[SocketAddr]) -> Vec<Socket> {
    descriptors()
        .into_iter()
        .filter_map(|fd| {
            let peer = address(getpeername::<SockaddrStorage>(fd))?;
            let local = address(getsockname::<SockaddrStorage>(fd))?;
            targets
                .contains(&peer)
                .then_some(Socket { fd, local, peer })
        })
        .collect()
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

/// A connection attempt in progress.
pub(crate) struct AttemptGuard<'a> {
    watched: &'a Watched,
}

impl Drop for AttemptGuard<'_> {
    fn drop(&mut self) {
        lock(&self.watched.state).attempt = None;
    }
}

/// A connection (`C`: a `PgConnection`, a `QueueSession`) and how the
/// watchdog sees it; forgotten by the watchdog when dropped.
#[derive(Debug)]
pub(crate) struct Guarded<C> {
    conn: C,
    watched: Arc<Watched>,
}

impl<C> Guarded<C> {
    /// `conn`, watched as `watched`.
    pub(crate) fn new(conn: C, watched: Arc<Watched>) -> Self {
        Guarded { conn, watched }
    }

    /// How the watchdog sees it.
    pub(crate) fn watched(&self) -> &Watched {
        &self.watched
    }

    /// Runs `f` on the connection as a call that may take up to `limit`
    /// (`None`: as long as the runner runs; see [`Watched::begin`]).
    pub(crate) fn call<R>(&mut self, limit: Option<Duration>, f: impl FnOnce(&mut C) -> R) -> R {
        let _call = self.watched.begin(limit);
        f(&mut self.conn)
    }

    /// The connection, for a use the watchdog does not time (a handler's).
    pub(crate) fn conn(&mut self) -> &mut C {
        &mut self.conn
    }
}

impl<C> std::ops::Deref for Guarded<C> {
    type Target = C;
    fn deref(&self) -> &C {
        &self.conn
    }
}

impl<C> std::ops::DerefMut for Guarded<C> {
    fn deref_mut(&mut self) -> &mut C {
        &mut self.conn
    }
}

impl<C> Drop for Guarded<C> {
    fn drop(&mut self) {
        // Before the connection closes its descriptor.
        self.watched.set_socket(None);
    }
}

/// This process's open descriptors.
fn descriptors() -> Vec<RawFd> {
    std::fs::read_dir("/proc/self/fd")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|entry| entry.file_name().to_str()?.parse::<RawFd>().ok())
        .collect()
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

#[cfg(test)]
mod tests {
    use std::io::Read;
    use std::net::{TcpListener, TcpStream};

    use super::*;

    /// A server that never answers, as a frozen one: its kernel completes
    /// the TCP handshakes and takes what is sent, and nothing accepts them.
    fn silent_server() -> (TcpListener, SocketAddr) {
        let server = TcpListener::bind("127.0.0.1:0").expect("bind");
        let addr = server.local_addr().expect("address");
        (server, addr)
    }

    fn connect(server: SocketAddr) -> TcpStream {
        let stream = TcpStream::connect(server).expect("connect");
        stream
            .set_read_timeout(Some(Duration::from_millis(50)))
            .expect("read timeout");
        stream
    }

    fn socket_of(stream: &TcpStream) -> Option<Socket> {
        Socket::find(stream.local_addr().ok()?, stream.peer_addr().ok()?)
    }

    /// Whether `stream` was shut down: a read ends at once, where one on a
    /// silent connection times out.
    fn is_shut(stream: &mut TcpStream) -> bool {
        matches!(stream.read(&mut [0u8; 1]), Ok(0))
    }

    #[test]
    fn a_call_past_its_limit_ends_every_connection_to_its_server() {
        let (_server, addr) = silent_server();
        let (_other, other_addr) = silent_server();
        let watchdog = Watchdog::default();
        let (a, b, c) = (
            watchdog.watch("a", Owner::Runner),
            watchdog.watch("b", Owner::Handler),
            watchdog.watch("c", Owner::Runner),
        );
        let (mut sa, mut sb, mut sc) = (connect(addr), connect(addr), connect(other_addr));
        a.set_socket(socket_of(&sa));
        b.set_socket(socket_of(&sb));
        c.set_socket(socket_of(&sc));
        let _unbounded = b.begin(None);
        watchdog.check();
        assert!(!is_shut(&mut sa), "nothing overran yet");
        let _call = a.begin(Some(Duration::ZERO));
        watchdog.check();
        assert!(is_shut(&mut sa));
        assert!(
            is_shut(&mut sb),
            "the same server's, in a call without a limit"
        );
        assert!(!is_shut(&mut sc), "another server's");
        assert_eq!(watchdog.ended(), 2);
    }

    #[test]
    fn past_the_stop_deadline_the_runners_connections_end_and_handlers_keep_theirs() {
        let (_server, addr) = silent_server();
        let watchdog = Watchdog::default();
        let (runner, handler) = (
            watchdog.watch("runner", Owner::Runner),
            watchdog.watch("handler", Owner::Handler),
        );
        let (mut sr, mut sh) = (connect(addr), connect(addr));
        runner.set_socket(socket_of(&sr));
        handler.set_socket(socket_of(&sh));
        let _vacuum = runner.begin(None);
        watchdog.check();
        assert!(
            !is_shut(&mut sr),
            "a call without a limit, the runner running"
        );
        watchdog.stop_by(Instant::now());
        watchdog.check();
        assert!(is_shut(&mut sr));
        assert!(!is_shut(&mut sh));
        assert_eq!(watchdog.ended(), 0, "no server was found hung");
    }

    #[test]
    fn an_attempt_past_its_limit_ends_the_sockets_it_opened() {
        let (_server, addr) = silent_server();
        let watchdog = Watchdog::default();
        let mut before = connect(addr);
        let watched = watchdog.watch("attempt", Owner::Handler);
        let _attempt = watched.begin_attempt(vec![addr], Duration::ZERO);
        let mut opened = connect(addr);
        watchdog.check();
        assert!(is_shut(&mut opened));
        assert!(!is_shut(&mut before), "opened before the attempt");
    }
}
