//! Reaching the database, and reading a job id, as every command does.

use diesel::{Connection, PgConnection};
use jobqueue_core::JobId;
use jobqueue_core::engine::{DEFAULT_CONNECT_TIMEOUT, connectable_url};

use crate::CliError;

/// A connection to `url`, whose connect gives up after
/// [`DEFAULT_CONNECT_TIMEOUT`] unless the URL sets its own
/// `connect_timeout`.
pub(crate) fn connect(url: &str) -> Result<PgConnection, CliError> {
    let url = connectable_url(url, DEFAULT_CONNECT_TIMEOUT)?;
    Ok(PgConnection::establish(&url).map_err(jobqueue_core::Error::from)?)
}

/// A job id (or a workflow's) as the command line gives it.
pub(crate) fn parse_id(id: &str) -> Result<JobId, CliError> {
    Ok(id.parse::<JobId>()?)
}
