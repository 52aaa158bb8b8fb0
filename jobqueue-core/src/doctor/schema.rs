//! `migrations`: whether the database has the schema this library embeds.
//!
//! Read-only: the harness's reading of what is applied would create
//! jobqueue's table of versions in a database that has none; the doctor
//! only compares the versions recorded there (and those of jobqueue's that
//! an older jobqueue recorded in Diesel's table) with the embedded ones.
//! The application's own Diesel migrations play no part.

use diesel::prelude::*;

use super::{Check, CheckStatus, format, read};
use crate::Result;

/// The name of the `migrations` check.
pub(super) const MIGRATIONS_CHECK: &str = "migrations";

/// The `migrations` check, and whether the checks of the jobs table can run.
pub(super) struct Schema {
    pub(super) check: Check,
    pub(super) ready: bool,
}

/// Compares the embedded migrations with those applied.
pub(super) fn migrations(conn: &mut PgConnection) -> Result<Schema> {
    let reading = read(conn, crate::migrate::read_schema)?;
    let pending = reading.pending();
    let (embedded, applied) = (&reading.embedded, &reading.applied);
    let present = &reading;
    let unknown: Vec<String> = applied
        .iter()
        .filter(|version| !embedded.iter().any(|(v, _)| v == *version))
        .cloned()
        .collect();
    let ready = pending.is_empty() && present.missing_tables.is_empty();
    let check = if !pending.is_empty() {
        let schema = if present.missing_tables.iter().any(|t| t == "jobqueue_jobs") {
            "no jobqueue schema (no jobqueue_jobs table)"
        } else {
            "the schema is behind this library"
        };
        Check::graded(
            MIGRATIONS_CHECK,
            CheckStatus::Fail,
            format!(
                "{} of {} migrations pending ({}); {schema}: the checks of the jobs table are \
                 left out",
                pending.len(),
                embedded.len(),
                format::list(&pending, 3)
            ),
            "run `jobqueue migrate` (it applies them; several migrators at once take turns)",
        )
    } else if !present.missing_tables.is_empty() {
        Check::graded(
            MIGRATIONS_CHECK,
            CheckStatus::Fail,
            format!(
                "every migration is recorded as applied, yet {} missing: the checks of the jobs \
                 table are left out",
                match present.missing_tables.as_slice() {
                    [one] => format!("table {one} is"),
                    many => format!("tables {} are", many.join(", ")),
                }
            ),
            "the tables were dropped by hand, or the connection's search_path does not \
             reach them: set the search_path (or the URL's `options=-csearch_path=...`) \
             to the schema the migrations ran in",
        )
    } else if !unknown.is_empty() {
        Check::graded(
            MIGRATIONS_CHECK,
            CheckStatus::Warn,
            format!(
                "all {} migrations applied, and {} this library (jobqueue {}) does not know: {}",
                embedded.len(),
                unknown.len(),
                crate::VERSION,
                format::list(&unknown, 3)
            ),
            "a newer jobqueue migrated this database: run this check (and the runners) \
             with that version",
        )
    } else if present.in_diesels_table > 0 {
        Check::graded(
            MIGRATIONS_CHECK,
            CheckStatus::Warn,
            format!(
                "all {} migrations applied; {} of them recorded in the application's Diesel \
                 table (__diesel_schema_migrations) by an older jobqueue, where `diesel \
                 migration revert` trips on them",
                embedded.len(),
                present.in_diesels_table
            ),
            "run `jobqueue migrate`: it moves them to jobqueue_schema_migrations, and applies \
             nothing else",
        )
    } else {
        Check::ok(
            MIGRATIONS_CHECK,
            format!(
                "all {} migrations applied (latest {})",
                embedded.len(),
                embedded
                    .last()
                    .map(|(_, name)| name.as_str())
                    .unwrap_or("none")
            ),
        )
    };
    Ok(Schema { check, ready })
}
