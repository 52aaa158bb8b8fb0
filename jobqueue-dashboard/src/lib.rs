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

mod assets;
mod error;
mod form;
mod pages;
mod routes;
mod security;
mod server;

use diesel::PgConnection;
use diesel::r2d2::{ConnectionManager, Pool, PooledConnection};

pub use error::DashboardError;
pub use server::{DashboardServer, serve};

/// How a dashboard works.
#[derive(Debug, Clone)]
pub struct DashboardConfig {
    /// PostgreSQL URL (libpq syntax).
    pub database_url: String,
    /// Show, never act: no action buttons, and every POST refused.
    pub read_only: bool,
    /// The secret a request must carry (its cookie, set by
    /// `/login?token=...`, or `Authorization: Bearer`); required by
    /// [`serve`] on an address other machines can reach. At least 16
    /// characters.
    pub access_token: Option<String>,
    /// The path the dashboard is mounted under (`""` at the root, or
    /// e.g. `"/jobs-admin"`): links and redirects start with it.
    pub base_path: String,
    /// How long one page's reads may take before the page says so.
    /// Default 5 s.
    pub statement_timeout: std::time::Duration,
}

impl DashboardConfig {
    /// Defaults for a dashboard on `database_url`: read and write, no
    /// access token, at the root.
    pub fn new(database_url: impl Into<String>) -> Self {
        DashboardConfig {
            database_url: database_url.into(),
            read_only: false,
            access_token: None,
            base_path: String::new(),
            statement_timeout: std::time::Duration::from_secs(5),
        }
    }
}

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
#[derive(Debug, Clone)]
pub struct Request {
    /// The method.
    pub method: Method,
    /// The path below the dashboard's `base_path`, with its query string
    /// (`/jobs?status=failed`).
    pub path: String,
    /// The `Cookie` header, if any.
    pub cookie: Option<String>,
    /// The `Authorization` header, if any.
    pub authorization: Option<String>,
    /// The body (a POST's `application/x-www-form-urlencoded` form).
    pub body: Vec<u8>,
}

/// The dashboard's answer to a [`Request`].
#[derive(Debug, Clone)]
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
    /// A dashboard as `config` says. Checks the token's length and that
    /// the database answers (a connection is opened to see).
    pub fn new(mut config: DashboardConfig) -> Result<Self, DashboardError> {
        if let Some(token) = &config.access_token
            && token.chars().count() < 16
        {
            return Err(DashboardError::WeakToken(token.chars().count()));
        }
        config.base_path = config.base_path.trim_end_matches('/').to_owned();
        let pool = Pool::builder()
            .max_size(4)
            .min_idle(Some(0))
            .connection_timeout(std::time::Duration::from_secs(10))
            .connection_customizer(Box::new(Timeout(config.statement_timeout)))
            .build(ConnectionManager::<PgConnection>::new(&config.database_url))
            .map_err(pool_error)?;
        // The pool opens connections on demand: one now, so that a wrong
        // URL or a server that does not answer stops the start at once,
        // with libpq's reason.
        {
            use diesel::Connection;
            PgConnection::establish(&config.database_url).map_err(jobqueue_core::Error::from)?;
        }
        Ok(Dashboard {
            config,
            pool,
            csrf: security::random_secret(),
        })
    }

    /// Answers one request.
    pub fn handle(&self, request: &Request) -> Response {
        routes::handle(self, request)
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
