//! How a dashboard works: its database, its access token, the host names
//! it answers to, and the limits of its own HTTP server.

use std::time::Duration;

/// How a dashboard works.
///
/// Its `Debug` shows neither the access token nor the database URL's
/// password, so a configuration may be logged with `{:?}`.
#[derive(Clone)]
#[non_exhaustive]
pub struct DashboardConfig {
    /// PostgreSQL URL (libpq syntax).
    pub database_url: String,
    /// Show, never act: no action buttons, and every POST refused.
    pub read_only: bool,
    /// The secret a request must carry (its cookie, set by
    /// `/login?token=...`, or `Authorization: Bearer`); required by
    /// [`serve`](crate::serve) on an address other machines can reach. At
    /// least 16 characters.
    pub access_token: Option<String>,
    /// The path the dashboard is mounted under (`""` at the root, or
    /// e.g. `"/jobs-admin"`): links and redirects start with it.
    pub base_path: String,
    /// How long one page's reads may take before the page says so.
    /// Default 5 s.
    pub statement_timeout: Duration,
    /// Host names the dashboard answers to besides the ones it always
    /// does, each `name` (any port) or `name:port` (IPv6 literals in
    /// brackets, `[fd00::1]:8080`). Always answered: `localhost`,
    /// `127.0.0.1` and `[::1]` with any port, and, when served by
    /// [`serve`](crate::serve), the IP address it is bound to (every IP
    /// literal when bound to `0.0.0.0` or `[::]`). A request naming any other
    /// host gets 421 (this defeats DNS rebinding: a web page whose name is
    /// made to resolve to the dashboard's address still sends its own name).
    /// Name here what people type in the address bar to reach the
    /// dashboard, e.g. `jobs.internal` or the name of a proxy in front of
    /// it. An action (POST) must also come from a page of the dashboard
    /// itself: its `Origin` names the host the request was sent to, or one
    /// of these names.
    pub allowed_hosts: Vec<String>,
    /// The limits of [`serve`](crate::serve)'s HTTP server (an application
    /// that mounts the dashboard sets its own server's).
    pub http: HttpLimits,
    /// A secret the CSRF token of the forms is derived from, the same in
    /// every replica of an application that mounts the dashboard behind a
    /// load balancer (a form served by one replica is then accepted by
    /// another). At least 32 characters, as an access token's. `None` (the
    /// default): each dashboard draws its own at start.
    pub csrf_secret: Option<String>,
}

impl DashboardConfig {
    /// Defaults for a dashboard on `database_url`: read and write, no
    /// access token, at the root, answering to loopback names only, with
    /// [`HttpLimits::default`].
    pub fn new(database_url: impl Into<String>) -> Self {
        DashboardConfig {
            database_url: database_url.into(),
            read_only: false,
            access_token: None,
            base_path: String::new(),
            statement_timeout: Duration::from_secs(5),
            allowed_hosts: Vec::new(),
            http: HttpLimits::default(),
            csrf_secret: None,
        }
    }
}

impl std::fmt::Debug for DashboardConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DashboardConfig")
            .field(
                "database_url",
                &jobqueue_core::redact_url(&self.database_url),
            )
            .field("read_only", &self.read_only)
            .field(
                "access_token",
                &self.access_token.as_ref().map(|_| REDACTED),
            )
            .field("base_path", &self.base_path)
            .field("statement_timeout", &self.statement_timeout)
            .field("allowed_hosts", &self.allowed_hosts)
            .field("http", &self.http)
            .field("csrf_secret", &self.csrf_secret.as_ref().map(|_| REDACTED))
            .finish()
    }
}

/// What a secret is shown as.
pub(crate) const REDACTED: &str = "<redacted>";

/// The limits of the dashboard's own HTTP server ([`serve`](crate::serve)),
/// so that slow or oversized requests cannot hold it.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct HttpLimits {
    /// How long a connection may take to send a request's line and
    /// headers, counted from when the server starts waiting for them (on a
    /// kept-alive connection, from the previous answer): then it is
    /// closed. Default 10 s.
    pub header_read_timeout: Duration,
    /// How long an action's body may take to arrive once its headers have:
    /// then the answer is 408 and the connection is closed. Default 30 s.
    pub body_read_timeout: Duration,
    /// The largest request body read, in bytes (a form here is a few
    /// short fields): a larger one gets 413 before it is read. Default
    /// 64 KiB.
    pub max_body_bytes: usize,
    /// The largest request line and headers, in bytes: larger ones get
    /// 431. Default 16 KiB.
    pub max_header_bytes: usize,
    /// Connections served at once; more wait to be accepted until one
    /// closes. Default 512.
    pub max_connections: usize,
}

impl Default for HttpLimits {
    fn default() -> Self {
        HttpLimits {
            header_read_timeout: Duration::from_secs(10),
            body_read_timeout: Duration::from_secs(30),
            max_body_bytes: 64 * 1024,
            max_header_bytes: 16 * 1024,
            max_connections: 512,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn debug_shows_neither_the_token_nor_the_password() {
        let mut config = DashboardConfig::new("postgres://app:hunter2-hunter2@db.internal/app");
        config.access_token = Some("a-long-enough-secret".into());
        let shown = format!("{config:?}");
        assert!(!shown.contains("a-long-enough-secret"), "{shown}");
        assert!(!shown.contains("hunter2"), "{shown}");
        assert!(
            shown.contains("access_token: Some(\"<redacted>\")"),
            "{shown}"
        );
        assert!(
            shown.contains("postgres://app:***@db.internal/app"),
            "{shown}"
        );
    }
}
