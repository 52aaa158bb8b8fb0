//! The schema, embedded from the crate's `migrations/` and applied by
//! [`run_migrations`], its versions recorded in a table of jobqueue's own
//! ([`SchemaVersions`]).

use diesel::migration::{Migration, MigrationSource, MigrationVersion};
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
/// The versions are recorded in `jobqueue_schema_migrations`, never in the
/// application's own Diesel migrations table (see [`SchemaVersions`]).
pub fn run_migrations(conn: &mut PgConnection) -> Result<Vec<String>> {
    diesel::sql_query("SELECT pg_advisory_lock($1)")
        .bind::<BigInt, _>(MIGRATION_LOCK)
        .execute(conn)?;
    let applied = SchemaVersions::new(conn)
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

/// A migration harness (Diesel's [`MigrationHarness`]) that records the
/// versions it applies in `jobqueue_schema_migrations`, a table of
/// jobqueue's own: the application's `__diesel_schema_migrations` holds
/// the application's migrations only, so `diesel migration run`, `revert`
/// and `redo` see none of jobqueue's, and jobqueue's checks none of the
/// application's.
///
/// A database migrated by a jobqueue that recorded its versions in
/// Diesel's table has them moved over at the first use of the harness
/// (before it reads what is applied), in one transaction.
///
/// [`run_migrations`] is what an application calls; the harness is for
/// stepping through migrations one at a time (`run_next_migration`,
/// `revert_last_migration` of [`MIGRATIONS`]).
pub struct SchemaVersions<'c> {
    conn: &'c mut PgConnection,
}

impl std::fmt::Debug for SchemaVersions<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SchemaVersions").finish_non_exhaustive()
    }
}

impl<'c> SchemaVersions<'c> {
    /// The harness on `conn`. Writes nothing until it is used.
    pub fn new(conn: &'c mut PgConnection) -> Self {
        SchemaVersions { conn }
    }

    /// Creates the table of versions if it is missing, and moves
    /// jobqueue's versions out of Diesel's table into it.
    fn setup(&mut self) -> diesel::migration::Result<()> {
        let ours: Vec<String> = embedded()?
            .into_iter()
            .map(|(version, _)| version)
            .collect();
        self.conn.transaction(|conn| {
            diesel::sql_query(sql::MIGRATIONS_SETUP).execute(conn)?;
            if tables(conn)?.legacy {
                diesel::sql_query(sql::MIGRATIONS_ADOPT)
                    .bind::<Array<Text>, _>(&ours)
                    .execute(conn)?;
            }
            Ok(())
        })
    }
}

impl MigrationHarness<Pg> for SchemaVersions<'_> {
    fn run_migration(
        &mut self,
        migration: &dyn Migration<Pg>,
    ) -> diesel::migration::Result<MigrationVersion<'static>> {
        let version = migration.name().version().as_owned();
        let apply = |conn: &mut PgConnection| -> diesel::migration::Result<()> {
            migration.run(conn)?;
            diesel::sql_query(sql::MIGRATIONS_RECORD)
                .bind::<Text, _>(version.to_string())
                .execute(conn)?;
            Ok(())
        };
        if migration.metadata().run_in_transaction() {
            self.conn.transaction(apply)?;
        } else {
            apply(self.conn)?;
        }
        Ok(version)
    }

    fn revert_migration(
        &mut self,
        migration: &dyn Migration<Pg>,
    ) -> diesel::migration::Result<MigrationVersion<'static>> {
        let version = migration.name().version().as_owned();
        let revert = |conn: &mut PgConnection| -> diesel::migration::Result<()> {
            migration.revert(conn)?;
            diesel::sql_query(sql::MIGRATIONS_FORGET)
                .bind::<Text, _>(version.to_string())
                .execute(conn)?;
            Ok(())
        };
        if migration.metadata().run_in_transaction() {
            self.conn.transaction(revert)?;
        } else {
            revert(self.conn)?;
        }
        Ok(version)
    }

    fn applied_migrations(&mut self) -> diesel::migration::Result<Vec<MigrationVersion<'static>>> {
        self.setup()?;
        Ok(diesel::sql_query(sql::MIGRATIONS_APPLIED)
            .load::<Applied>(self.conn)?
            .into_iter()
            .map(|applied| MigrationVersion::from(applied.version))
            .collect())
    }
}

/// The embedded migrations, oldest first: (version, name).
fn embedded() -> diesel::migration::Result<Vec<(String, String)>> {
    Ok(MigrationSource::<Pg>::migrations(&MIGRATIONS)?
        .iter()
        .map(|m| (m.name().version().to_string(), m.name().to_string()))
        .collect())
}

#[derive(QueryableByName)]
struct Tables {
    /// `jobqueue_schema_migrations` exists.
    #[diesel(sql_type = Bool)]
    own: bool,
    /// `__diesel_schema_migrations` exists.
    #[diesel(sql_type = Bool)]
    legacy: bool,
}

fn tables(conn: &mut PgConnection) -> QueryResult<Tables> {
    diesel::sql_query(sql::MIGRATIONS_TABLES).get_result(conn)
}

/// What the database holds of the schema, read without writing anything
/// (the harness's reading of applied migrations creates its table).
pub(crate) struct SchemaReading {
    /// The embedded migrations: (version, name).
    pub(crate) embedded: Vec<(String, String)>,
    /// The versions the database records as applied: jobqueue's table's,
    /// and those of this library's that Diesel's table records (a jobqueue
    /// that recorded them there applied them).
    pub(crate) applied: Vec<String>,
    /// How many of `applied` Diesel's table records, not moved yet.
    pub(crate) in_diesels_table: usize,
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
    #[diesel(sql_type = Array<Text>)]
    missing_tables: Vec<String>,
}

#[derive(QueryableByName)]
struct Applied {
    #[diesel(sql_type = Text)]
    version: String,
}

pub(crate) fn read_schema(conn: &mut PgConnection) -> Result<SchemaReading> {
    let embedded = embedded().map_err(Error::Migration)?;
    let present = diesel::sql_query(sql::DOCTOR_SCHEMA).get_result::<Present>(conn)?;
    let tables = tables(conn)?;
    let mut applied: Vec<String> = if tables.own {
        diesel::sql_query(sql::MIGRATIONS_APPLIED)
            .load::<Applied>(conn)?
            .into_iter()
            .map(|a| a.version)
            .collect()
    } else {
        Vec::new()
    };
    let mut in_diesels_table = 0;
    if tables.legacy {
        let ours: Vec<&str> = embedded.iter().map(|(v, _)| v.as_str()).collect();
        for legacy in diesel::sql_query(sql::MIGRATIONS_APPLIED_LEGACY)
            .bind::<Array<Text>, _>(&ours)
            .load::<Applied>(conn)?
        {
            if !applied.contains(&legacy.version) {
                in_diesels_table += 1;
                applied.push(legacy.version);
            }
        }
    }
    applied.sort_unstable();
    Ok(SchemaReading {
        embedded,
        applied,
        in_diesels_table,
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
