-- Every statement of jobqueue-core/src/sql/migrations.rs, whole, with its doc
-- comment: written by the test of src/sql/expanded.rs, not by hand.

-- MIGRATIONS_SETUP
-- Creates the table of jobqueue's schema versions if it is missing, with
-- the columns of Diesel's own (a version, when it was applied).
    CREATE TABLE IF NOT EXISTS jobqueue_schema_migrations (
        version VARCHAR(50) PRIMARY KEY NOT NULL,
        run_on TIMESTAMP NOT NULL DEFAULT CURRENT_TIMESTAMP
    )
;

-- MIGRATIONS_ADOPT
-- Moves the versions in array `$1` (jobqueue's own) out of Diesel's
-- table into jobqueue's, keeping when each was applied. Run only when
-- Diesel's table exists.
    WITH moved AS (
        DELETE FROM __diesel_schema_migrations
        WHERE version = ANY($1::text[])
        RETURNING version, run_on
    )
    INSERT INTO jobqueue_schema_migrations (version, run_on)
    SELECT version, run_on FROM moved
    ON CONFLICT (version) DO NOTHING
;

-- MIGRATIONS_TABLES
-- Whether jobqueue's table of versions exists (`own`), and Diesel's
-- (`legacy`).
    SELECT to_regclass('jobqueue_schema_migrations') IS NOT NULL AS own,
           to_regclass('__diesel_schema_migrations') IS NOT NULL AS legacy
;

-- MIGRATIONS_APPLIED
-- The versions jobqueue recorded as applied, newest first.
    SELECT version::text AS version FROM jobqueue_schema_migrations ORDER BY version DESC
;

-- MIGRATIONS_APPLIED_LEGACY
-- Of the versions in array `$1` (jobqueue's own), those Diesel's table
-- records: applied by a jobqueue that recorded its versions there.
    SELECT version::text AS version FROM __diesel_schema_migrations
    WHERE version = ANY($1::text[])
    ORDER BY version DESC
;

-- MIGRATIONS_RECORD
-- Records version `$1` as applied.
INSERT INTO jobqueue_schema_migrations (version) VALUES ($1)
;

-- MIGRATIONS_FORGET
-- Removes version `$1` from the record (it was reverted).
DELETE FROM jobqueue_schema_migrations WHERE version = $1
;
