//! The statements of jobqueue's own record of its schema versions,
//! `jobqueue_schema_migrations` (`migrate.rs`), kept apart from the
//! application's Diesel migrations in `__diesel_schema_migrations`.
//!
//! Databases migrated before this table existed recorded jobqueue's
//! versions in Diesel's table; a migration run moves them over
//! ([`MIGRATIONS_ADOPT`]), and until then the readings take them from
//! there ([`MIGRATIONS_APPLIED_LEGACY`]), only those this library knows.

/// Creates the table of jobqueue's schema versions if it is missing, with
/// the columns of Diesel's own (a version, when it was applied).
pub(crate) const MIGRATIONS_SETUP: &str = "
    CREATE TABLE IF NOT EXISTS jobqueue_schema_migrations (
        version VARCHAR(50) PRIMARY KEY NOT NULL,
        run_on TIMESTAMP NOT NULL DEFAULT CURRENT_TIMESTAMP
    )";

/// Moves the versions in array `$1` (jobqueue's own) out of Diesel's
/// table into jobqueue's, keeping when each was applied. Run only when
/// Diesel's table exists.
pub(crate) const MIGRATIONS_ADOPT: &str = "
    WITH moved AS (
        DELETE FROM __diesel_schema_migrations
        WHERE version = ANY($1::text[])
        RETURNING version, run_on
    )
    INSERT INTO jobqueue_schema_migrations (version, run_on)
    SELECT version, run_on FROM moved
    ON CONFLICT (version) DO NOTHING";

/// Whether jobqueue's table of versions exists (`own`), and Diesel's
/// (`legacy`).
pub(crate) const MIGRATIONS_TABLES: &str = "
    SELECT to_regclass('jobqueue_schema_migrations') IS NOT NULL AS own,
           to_regclass('__diesel_schema_migrations') IS NOT NULL AS legacy";

/// The versions jobqueue recorded as applied, newest first.
pub(crate) const MIGRATIONS_APPLIED: &str = "
    SELECT version::text AS version FROM jobqueue_schema_migrations ORDER BY version DESC";

/// Of the versions in array `$1` (jobqueue's own), those Diesel's table
/// records: applied by a jobqueue that recorded its versions there.
pub(crate) const MIGRATIONS_APPLIED_LEGACY: &str = "
    SELECT version::text AS version FROM __diesel_schema_migrations
    WHERE version = ANY($1::text[])
    ORDER BY version DESC";

/// Records version `$1` as applied.
pub(crate) const MIGRATIONS_RECORD: &str =
    "INSERT INTO jobqueue_schema_migrations (version) VALUES ($1)";

/// Removes version `$1` from the record (it was reverted).
pub(crate) const MIGRATIONS_FORGET: &str =
    "DELETE FROM jobqueue_schema_migrations WHERE version = $1";
