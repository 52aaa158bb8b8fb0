//! The schema, embedded from the crate's `migrations/` and applied by [`run_migrations`].

use diesel::migration::MigrationSource;
use diesel::pg::Pg;
use diesel::prelude::*;
use diesel::sql_types::{Array, BigInt, Bool, Text};
use diesel_migrations::{EmbeddedMigrations, MigrationHarness, embed_migrations};

use crate::{Error, Result, sql};

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

/// What the database holds of the schema, read without writing anything
/// (diesel's own reading of applied migrations creates its table).
pub(crate) struct SchemaReading {
    /// The embedded migrations: (version, name).
    pub(crate) embedded: Vec<(String, String)>,
    /// The versions the database records as applied.
    pub(crate) applied: Vec<String>,
    /// The queue's tables the database lacks.
    pub(crate) missing_tables: Vec<String>,
}

impl SchemaReading {
    /// The names of the embedded migrations not applied.
    pub(crate) fn pending(&self) -> Vec<String> {
        self.embedded
            .iter()
            .filter(|(version, _)| !self.applied.contains(version))
            .map(|(_, name)| name.clone())
            .collect()
    }
}

#[derive(QueryableByName)]
struct Present {
    #[diesel(sql_type = Bool)]
    has_migrations_table: bool,
    #[diesel(sql_type = Array<Text>)]
    missing_tables: Vec<String>,
}

#[derive(QueryableByName)]
struct Applied {
    #[diesel(sql_type = Text)]
    version: String,
}

pub(crate) fn read_schema(conn: &mut PgConnection) -> Result<SchemaReading> {
    let embedded = MigrationSource::<Pg>::migrations(&MIGRATIONS)
        .map_err(Error::Migration)?
        .iter()
        .map(|m| (m.name().version().to_string(), m.name().to_string()))
        .collect();
    let present = diesel::sql_query(sql::DOCTOR_SCHEMA).get_result::<Present>(conn)?;
    let applied = if present.has_migrations_table {
        diesel::sql_query(sql::DOCTOR_APPLIED_MIGRATIONS)
            .load::<Applied>(conn)?
            .into_iter()
            .map(|a| a.version)
            .collect()
    } else {
        Vec::new()
    };
    Ok(SchemaReading {
        embedded,
        applied,
        missing_tables: present.missing_tables,
    })
}

/// The names of this library's migrations that the database has not
/// applied (all of them when it has no schema), read without writing
/// anything: what [`run_migrations`] would apply. A runner refuses to start
/// while any is pending.
pub fn pending_migrations(conn: &mut PgConnection) -> Result<Vec<String>> {
    Ok(read_schema(conn)?.pending())
}
