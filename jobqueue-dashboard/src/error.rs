//! Errors of the dashboard.

use std::net::SocketAddr;

/// Why the dashboard could not start.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum DashboardError {
    /// A queue operation failed (connecting, reading).
    #[error(transparent)]
    Queue(#[from] jobqueue_core::Error),
    /// The address is not a loopback address and no access token was set.
    #[error(
        "the dashboard on {0} would be reachable from other machines: set an access token \
         (--token or JOBQUEUE_DASHBOARD_TOKEN), or bind to 127.0.0.1"
    )]
    NeedsToken(SocketAddr),
    /// The access token is too easy to guess, or holds characters a
    /// cookie or a `/login` link cannot carry: the text says which.
    #[error(
        "the access token {0}: use at least 16 characters of at least 8 different ones, \
         printable ASCII without spaces, quotes, commas, semicolons or backslashes (for \
         example `openssl rand -hex 16`)"
    )]
    WeakToken(String),
    /// The shared CSRF secret (`csrf_secret`) is too easy to guess.
    #[error(
        "the CSRF secret {0}: use at least 32 characters of at least 8 different ones, \
         printable ASCII without spaces, quotes, commas, semicolons or backslashes (for \
         example `openssl rand -hex 32`), the same in every replica"
    )]
    WeakCsrfSecret(String),
    /// An entry of `allowed_hosts` is not a host name or IP literal with an
    /// optional port.
    #[error(
        "the allowed host `{0}` is not a host name, `name:port`, an IP address or `[IPv6]:port` \
         (wildcards are not supported: name each host)"
    )]
    AllowedHost(String),
    /// The address could not be bound.
    #[error("cannot serve the dashboard on {addr}: {reason} (choose another address with --addr)")]
    Bind {
        /// The address given.
        addr: SocketAddr,
        /// Why it could not be bound.
        reason: String,
    },
    /// The operating system refused to start the server's thread or its
    /// runtime.
    #[error("cannot start the dashboard's server thread: {0}")]
    Thread(#[from] std::io::Error),
}
