//! The handler pool's connections: the connector's handler connections,
//! refused (and, once pooled, discarded at checkout) when the server takes
//! no writes, so handlers get the primary after a failover instead of a
//! standby or a fenced host. The watchdog shuts them down when it finds
//! their server hung or read-only.

use std::sync::Arc;

use diesel::PgConnection;
use diesel::r2d2::ManageConnection;

use super::Connector;
use crate::hang_guard::Guarded;

/// Makes and checks the handler pool's connections.
#[derive(Debug)]
pub(crate) struct HandlerConnections {
    connector: Arc<Connector>,
}

impl HandlerConnections {
    /// The pool's connections, made by `connector`.
    pub(crate) fn new(connector: Arc<Connector>) -> Self {
        HandlerConnections { connector }
    }
}

impl ManageConnection for HandlerConnections {
    type Connection = Guarded<PgConnection>;
    type Error = diesel::r2d2::Error;

    fn connect(&self) -> Result<Guarded<PgConnection>, Self::Error> {
        self.connector.handler_connection().map_err(pool_error)
    }

    fn is_valid(&self, conn: &mut Guarded<PgConnection>) -> Result<(), Self::Error> {
        conn.call(
            Some(self.connector.db_timeout()),
            jobqueue_core::engine::connection::check_writable,
        )
        .map_err(pool_error)
    }

    fn has_broken(&self, conn: &mut Guarded<PgConnection>) -> bool {
        diesel::r2d2::R2D2Connection::is_broken(conn.conn())
    }
}

/// `error` as the pool reports it.
fn pool_error(error: jobqueue_core::Error) -> diesel::r2d2::Error {
    match error {
        jobqueue_core::Error::Connection(e) => diesel::r2d2::Error::ConnectionError(e),
        jobqueue_core::Error::Database(e) => diesel::r2d2::Error::QueryError(e),
        other => diesel::r2d2::Error::QueryError(other.into()),
    }
}
