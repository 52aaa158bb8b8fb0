//! The schema, embedded from the crate's `migrations/` and applied by [`run_migrations`].

use diesel::prelude::*;
use diesel::sql_types::BigInt;
use diesel_migrations::{EmbeddedMigrations, MigrationHarness, embed_migrations};

use crate::{Error, Result};

/// The project's migrations, compiled into the binary.
pub const MIGRATIONS: EmbeddedMigrations = embed_migrations!("migrations");

/// Advisory-lock key that serializes concurrent migrators ("jobqueue" in ASCII).
const MIGRATION_LOCK: i64 = 0x6a6f_6271_7565_7565;

/// Applies every pending migration; returns the versions applied.
///
/// Safe when several processes start at once: they take turns under a
/// PostgreSQL advisory lock, and the later ones find nothing left to do.
pub fn run_migrations(conn: &mut PgConnection) -> Result<Vec<String>> {
    diesel::sql_query("SELECT pg_advisory_lock($1)")
        .bind::<BigInt, _>(MIGRATION_LOCK)
        .execute(conn)?;
    let applied = conn
        .run_pending_migrations(MIGRATIONS)
        .map(|versions| versions.iter().map(ToString::to_string).collect())
        .map_err(Error::Migration);
    let unlocked = diesel::sql_query("SELECT pg_advisory_unlock($1)")
        .bind::<BigInt, _>(MIGRATION_LOCK)
        .execute(conn);
    let applied = applied?;
    unlocked?;
    Ok(applied)
}
