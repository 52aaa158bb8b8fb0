//! The rows of statements that return the jobs they changed: `RETURNING
//! id`, and `RETURNING id, status` where each went matters.

use diesel::QueryableByName;
use diesel::sql_types::{Text, Uuid};

use crate::{JobId, JobStatus};

/// One job a statement changed.
#[derive(QueryableByName)]
pub(crate) struct IdRow {
    #[diesel(sql_type = Uuid)]
    pub(crate) id: JobId,
}

/// One job a statement changed, and the status it left it in.
#[derive(QueryableByName)]
pub(crate) struct IdStatusRow {
    #[diesel(sql_type = Uuid)]
    pub(crate) id: JobId,
    #[diesel(sql_type = Text)]
    pub(crate) status: JobStatus,
}
