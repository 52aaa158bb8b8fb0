//! Keys: keyed jobs that wait for their key's room although it has some.

use diesel::prelude::*;
use diesel::sql_types::{BigInt, Nullable, Text};

use super::{Check, CheckStatus, DoctorOptions, read};
use crate::{Result, sql};

/// The name of the `keys` check.
pub(super) const KEYS: &str = "keys";

#[derive(QueryableByName)]
struct Stalled {
    #[diesel(sql_type = BigInt)]
    keys: i64,
    #[diesel(sql_type = Nullable<Text>)]
    example: Option<String>,
}

/// `keys`: warns when jobs of a key have waited for their key's room for
/// over a minute although it has room: no admission looked at them (a
/// runner of their queue admits them within its rescue interval, so none
/// runs, or its admission is stalled).
pub(super) fn keys(conn: &mut PgConnection, _: &DoctorOptions) -> Result<Check> {
    let stalled = read(conn, |conn| {
        Ok(diesel::sql_query(sql::DOCTOR_KEYS).get_result::<Stalled>(conn)?)
    })?;
    if stalled.keys == 0 {
        return Ok(Check::ok(
            KEYS,
            "no key's jobs wait longer than a minute for room their key has",
        ));
    }
    Ok(Check::graded(
        KEYS,
        CheckStatus::Warn,
        format!(
            "jobs of {} keys (such as {}) have waited over a minute although their key has room",
            stalled.keys,
            stalled.example.as_deref().unwrap_or("?")
        ),
        "start a runner of their queue (its maintenance admits them every rescue interval); \
         if one runs, its log says why its admission does not",
    ))
}
