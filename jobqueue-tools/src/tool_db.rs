//! The databases the demo and the bench work in: created by them, marked as
//! theirs with a comment, and dropped by them only when so marked. A name
//! given with `--database` that belongs to anything else is refused, never
//! dropped.

use diesel::sql_types::Text;
use diesel::{Connection, OptionalExtension, PgConnection, RunQueryDsl};

use crate::ToolError;

/// The comment that marks a database as created by `tool`.
fn marker(tool: &str) -> String {
    format!("created by jobqueue {tool}; dropped and recreated by each run")
}

#[derive(diesel::QueryableByName)]
struct Comment {
    #[diesel(sql_type = diesel::sql_types::Nullable<Text>)]
    comment: Option<String>,
}

fn db_error(e: diesel::result::Error) -> ToolError {
    ToolError::Queue(e.into())
}

/// Checks that `name` is a plain database name.
fn check_name(name: &str) -> Result<(), ToolError> {
    if name.is_empty()
        || name.len() > 63
        || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
    {
        return Err(ToolError::Usage(format!(
            "--database `{name}` must be a plain name of at most 63 characters ([A-Za-z0-9_])"
        )));
    }
    Ok(())
}

/// Whether database `name` exists on the server, and if so whether `tool`
/// created it: `None` if it does not exist.
fn owned_by(admin: &mut PgConnection, name: &str, tool: &str) -> Result<Option<bool>, ToolError> {
    let row = diesel::sql_query(
        "SELECT shobj_description(oid, 'pg_database') AS comment
         FROM pg_database WHERE datname = $1",
    )
    .bind::<Text, _>(name)
    .get_result::<Comment>(admin)
    .optional()
    .map_err(db_error)?;
    Ok(row.map(|row| row.comment.as_deref() == Some(marker(tool).as_str())))
}

/// Refuses a database `tool` did not create.
fn refuse_foreign(admin: &mut PgConnection, name: &str, tool: &str) -> Result<bool, ToolError> {
    match owned_by(admin, name, tool)? {
        None => Ok(false),
        Some(true) => Ok(true),
        Some(false) => Err(ToolError::Usage(format!(
            "database `{name}` exists and was not created by jobqueue {tool}: it is left alone \
             (pass --database with a name that is not in use)"
        ))),
    }
}

/// Drops database `name` (if `tool` created it) and creates it anew, marked
/// as `tool`'s; returns its URL on the server at `server_url`. A database of
/// that name that `tool` did not create is refused with a usage error and
/// left as it is.
pub(crate) fn recreate(server_url: &str, name: &str, tool: &str) -> Result<String, ToolError> {
    check_name(name)?;
    let mut admin = PgConnection::establish(server_url).map_err(|e| ToolError::Queue(e.into()))?;
    if refuse_foreign(&mut admin, name, tool)? {
        diesel::sql_query(format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)"))
            .execute(&mut admin)
            .map_err(db_error)?;
    }
    diesel::sql_query(format!("CREATE DATABASE {name}"))
        .execute(&mut admin)
        .map_err(db_error)?;
    // COMMENT takes a literal, not a parameter; the marker is a constant
    // text of this module.
    diesel::sql_query(format!("COMMENT ON DATABASE {name} IS '{}'", marker(tool)))
        .execute(&mut admin)
        .map_err(db_error)?;
    Ok(jobqueue_core::engine::with_database(server_url, name)?)
}

/// Checks that database `name`, if it exists, was created by `tool`;
/// returns whether it exists.
pub(crate) fn check_owned(server_url: &str, name: &str, tool: &str) -> Result<bool, ToolError> {
    check_name(name)?;
    let mut admin = PgConnection::establish(server_url).map_err(|e| ToolError::Queue(e.into()))?;
    refuse_foreign(&mut admin, name, tool)
}

/// Drops database `name` if `tool` created it; a database it did not create
/// is left alone.
pub(crate) fn drop_own(server_url: &str, name: &str, tool: &str) -> Result<(), ToolError> {
    check_name(name)?;
    let mut admin = PgConnection::establish(server_url).map_err(|e| ToolError::Queue(e.into()))?;
    if owned_by(&mut admin, name, tool)? == Some(true) {
        diesel::sql_query(format!("DROP DATABASE {name} WITH (FORCE)"))
            .execute(&mut admin)
            .map_err(db_error)?;
    }
    Ok(())
}
