//! The jobqueue web dashboard: every queue at a glance, jobs by status,
//! queue, type, id or unique key, one job in full, the failed jobs (the
//! dead letter), the periodic schedules, and the actions on them (retry,
//! cancel, delete, pause and resume), through the same library calls as
//! the `jobqueue` command.
//!
//! Pages are rendered on the server (no JavaScript build; one small script
//! refreshes the overview) from assets compiled into the binary. Every
//! action is a POST carrying the dashboard's CSRF token; `read_only` leaves
//! them out and refuses them. Everything read from the database is escaped.
//!
//! [`serve`] runs it on its own HTTP server (what `jobqueue dashboard`
//! does); [`Dashboard::handle`] answers one [`Request`], for an application
//! that mounts it in its own HTTP server under a path of its choosing.
//!
//! ```no_run
//! use jobqueue_dashboard::{Dashboard, DashboardConfig};
//!
//! # fn main() -> Result<(), jobqueue_dashboard::DashboardError> {
//! let dashboard = Dashboard::new(DashboardConfig::new("postgres://localhost/app"))?;
//! let server = jobqueue_dashboard::serve(dashboard, "127.0.0.1:8080".parse().unwrap())?;
//! println!("dashboard at http://{}/", server.addr());
//! server.wait();
//! # Ok(())
//! # }
//! ```

mod admission;
mod assets;
mod config;
mod error;
mod exchange;
mod form;
mod hosts;
mod listen;
mod pages;
mod refusal;
mod routes;
mod security;
mod server;

use diesel::PgConnection;
use diesel::r2d2::{ConnectionManager, Pool, PooledConnection};

pub use config::{DashboardConfig, HttpLimits};
pub use error::DashboardError;
pub use server::{DashboardServer, serve};

/// The HTTP method of a [`Request`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Method {
    /// A page.
    Get,
    /// An action.
    Post,
    /// Anything else (refused).
    Other,
}

/// One HTTP request, as the dashboard needs it.
///
/// An application that mounts the dashboard fills in `host`, `origin` and
/// `referer` from its server's request: a request without a host is
/// refused (400), one naming a host the dashboard does not answer to gets
/// 421, and an action whose origin is another site's gets 403 (see
/// [`DashboardConfig::allowed_hosts`]).
#[derive(Clone)]
#[non_exhaustive]
pub struct Request {
    /// The method.
    pub method: Method,
    /// The path below the dashboard's `base_path`, with its query string
    /// (`/jobs?status=failed`).
    pub path: String,
    /// The host the request was sent to: its `Host` header (or the
    /// authority of an absolute request target), `name` or `name:port`.
    pub host: Option<String>,
    /// The `Origin` header, if any.
    pub origin: Option<String>,
    /// The `Referer` header, if any.
    pub referer: Option<String>,
    /// The `Cookie` header, if any.
    pub cookie: Option<String>,
    /// The `Authorization` header, if any.
    pub authorization: Option<String>,
    /// The body (a POST's `application/x-www-form-urlencoded` form).
    pub body: Vec<u8>,
}

impl Request {
    /// A request with `method` for `path`, no headers and no body.
    pub fn new(method: Method, path: impl Into<String>) -> Self {
        Request {
            method,
            path: path.into(),
            host: None,
            origin: None,
            referer: None,
            cookie: None,
            authorization: None,
            body: Vec::new(),
        }
    }
}

/// Shows no secret: the cookie and the authorization are left out, and
/// the query string of `/login?token=...` is redacted.
impl std::fmt::Debug for Request {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Request")
            .field("method", &self.method)
            .field("path", &security::shown_path(&self.path))
            .field("host", &self.host)
            .field("origin", &self.origin)
            .field("referer", &self.referer)
            .field("cookie", &self.cookie.as_ref().map(|_| config::REDACTED))
            .field(
                "authorization",
                &self.authorization.as_ref().map(|_| config::REDACTED),
            )
            .field("body", &format_args!("{} bytes", self.body.len()))
            .finish()
    }
}

/// The dashboard's answer to a [`Request`].
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct Response {
    /// The HTTP status.
    pub status: u16,
    /// Headers (`Content-Type` among them).
    pub headers: Vec<(&'static str, String)>,
    /// The body.
    pub body: Vec<u8>,
}

/// A dashboard: its configuration, a small pool of connections, and the
/// CSRF token its forms carry (new at every start).
pub struct Dashboard {
    config: DashboardConfig,
    pool: Pool<ConnectionManager<PgConnection>>,
    csrf: String,
    hosts: hosts::Hosts,
}

impl std::fmt::Debug for Dashboard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Dashboard")
            .field("read_only", &self.config.read_only)
            .finish_non_exhaustive()
    }
}

/// Sets each pooled connection's statement timeout.
#[derive(Debug)]
struct Timeout(std::time::Duration);

impl diesel::r2d2::CustomizeConnection<PgConnection, diesel::r2d2::Error> for Timeout {
    fn on_acquire(&self, conn: &mut PgConnection) -> Result<(), diesel::r2d2::Error> {
        use diesel::RunQueryDsl;
        diesel::sql_query(format!(
            "SET statement_timeout = {}",
            self.0.as_millis().max(1)
        ))
        .execute(conn)
        .map(|_| ())
        .map_err(diesel::r2d2::Error::QueryError)
    }
}

impl Dashboard {
    /// A dashboard as `config` says. Checks the token's length, the
    /// allowed hosts, and that the database answers (a connection is
    /// opened to see).
    pub fn new(mut config: DashboardConfig) -> Result<Self, DashboardError> {
        if let Some(token) = &config.access_token {
            security::check_token(token).map_err(DashboardError::WeakToken)?;
        }
        let csrf = match &config.csrf_secret {
            Some(secret) => security::csrf_from(secret).map_err(DashboardError::WeakCsrfSecret)?,
            None => security::random_secret(),
        };
        let hosts = hosts::Hosts::new(&config.allowed_hosts)
            .map_err(|hosts::BadHost(host)| DashboardError::AllowedHost(host))?;
        config.base_path = config.base_path.trim_end_matches('/').to_owned();
        // Refuses an empty URL; bounds each connect unless the URL does.
        let url = jobqueue_core::engine::connectable_url(
            &config.database_url,
            jobqueue_core::engine::DEFAULT_CONNECT_TIMEOUT,
        )?;
        let pool = Pool::builder()
            .max_size(4)
            .min_idle(Some(0))
            .connection_timeout(std::time::Duration::from_secs(10))
            .connection_customizer(Box::new(Timeout(config.statement_timeout)))
            .build(ConnectionManager::<PgConnection>::new(&url))
            .map_err(pool_error)?;
        // The pool opens connections on demand: one now, so that a wrong
        // URL or a server that does not answer stops the start at once,
        // with libpq's reason.
        {
            use diesel::Connection;
            PgConnection::establish(&url).map_err(jobqueue_core::Error::from)?;
        }
        Ok(Dashboard {
            config,
            pool,
            csrf,
            hosts,
        })
    }

    /// Answers one request.
    pub fn handle(&self, request: &Request) -> Response {
        match self.check_headers(request) {
            Some(refused) => refused,
            None => routes::handle(self, request),
        }
    }

    /// The answer to a request refused on its headers alone, before its
    /// body is read: a host the dashboard does not answer to (421), a
    /// missing access token (401), an action from another site or on a
    /// read-only dashboard (403), a method other than GET, HEAD and POST
    /// (405). `None` if the request may go on; [`Dashboard::handle`]
    /// checks the same. An application that mounts the dashboard calls it
    /// before reading a body, so that no one without the token can make
    /// its server read one.
    pub fn check_headers(&self, request: &Request) -> Option<Response> {
        admission::check(self, request)
    }

    fn conn(
        &self,
    ) -> Result<PooledConnection<ConnectionManager<PgConnection>>, jobqueue_core::Error> {
        self.pool.get().map_err(pool_error)
    }
}

/// A pool that cannot give a connection, as the connection error it is.
fn pool_error(error: diesel::r2d2::PoolError) -> jobqueue_core::Error {
    jobqueue_core::Error::Connection(diesel::ConnectionError::BadConnection(error.to_string()))
}
