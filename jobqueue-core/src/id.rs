//! Job identifiers: time-ordered UUIDv7, made by the client.

use std::fmt;
use std::str::FromStr;

use diesel::deserialize::{FromSql, FromSqlRow};
use diesel::expression::AsExpression;
use diesel::pg::{Pg, PgValue};
use diesel::serialize::{Output, ToSql};
use diesel::sql_types;

/// The id of a job: a UUIDv7, so ids sort by creation time and the primary-key
/// index only ever grows at its right edge.
#[derive(
    Clone,
    Copy,
    PartialEq,
    Eq,
    PartialOrd,
    Ord,
    Hash,
    AsExpression,
    FromSqlRow,
    serde::Serialize,
    serde::Deserialize,
)]
#[diesel(sql_type = sql_types::Uuid)]
#[serde(transparent)]
pub struct JobId(uuid::Uuid);

impl JobId {
    /// A new time-ordered id.
    pub fn new() -> Self {
        JobId(uuid::Uuid::now_v7())
    }

    /// The id as a UUID.
    pub fn as_uuid(&self) -> uuid::Uuid {
        self.0
    }
}

impl Default for JobId {
    fn default() -> Self {
        Self::new()
    }
}

impl From<uuid::Uuid> for JobId {
    fn from(id: uuid::Uuid) -> Self {
        JobId(id)
    }
}

impl fmt::Display for JobId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&self.0, f)
    }
}

impl fmt::Debug for JobId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "JobId({})", self.0)
    }
}

impl FromStr for JobId {
    type Err = crate::Error;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        uuid::Uuid::parse_str(s.trim())
            .map(JobId)
            .map_err(|e| crate::Error::invalid("job id", format!("`{s}` is not a UUID: {e}")))
    }
}

impl FromSql<sql_types::Uuid, Pg> for JobId {
    fn from_sql(bytes: PgValue<'_>) -> diesel::deserialize::Result<Self> {
        <uuid::Uuid as FromSql<sql_types::Uuid, Pg>>::from_sql(bytes).map(JobId)
    }
}

impl ToSql<sql_types::Uuid, Pg> for JobId {
    fn to_sql<'b>(&'b self, out: &mut Output<'b, '_, Pg>) -> diesel::serialize::Result {
        <uuid::Uuid as ToSql<sql_types::Uuid, Pg>>::to_sql(&self.0, out)
    }
}
