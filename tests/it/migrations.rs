//! The schema's migrations on a database that already holds jobs, and
//! beside an application's own Diesel migrations.
//!
//! The row-layout migration copies `jobqueue_jobs` (PostgreSQL cannot
//! reorder columns in place): every row, every value and every grant must
//! survive it, and the queue must work on the copy.

use diesel::connection::SimpleConnection;
use diesel::prelude::*;
use diesel::sql_types::{Bool, Text};
use diesel_migrations::{FileBasedMigrations, MigrationHarness};
use jobqueue_core::{Check, CheckStatus, DoctorOptions, MIGRATIONS, SchemaVersions};
use jobqueue_tests::{TestDb, claim_one, scalar};

/// The version of the migration that lays the row out anew.
const ROW_LAYOUT: &str = "20261125000001";

/// Jobs in every state, written in the layout before the migration (every
/// column named, so they are the same rows in either layout).
const OLD_ROWS: &str = "
    INSERT INTO jobqueue_jobs
        (id, job_type, queue, priority, status, payload, run_at, attempts, max_attempts,
         last_error, errors, unique_key, worker_id, claim_count, claimed_at, heartbeat_at,
         lease_expires_at, cancel_requested, progress, current_stage, events_count,
         created_at, started_at, finished_at, snoozes)
    VALUES
        ('018f0000-0000-7000-8000-000000000001', 'mail', 'default', 100, 'pending',
         '{\"to\": \"a@example.com\", \"n\": [1, 2, 3]}', now() - interval '1 minute', 0, 3,
         NULL, '[]', 'mail:a', NULL, 0, NULL, NULL, NULL, false, 0, NULL, 0,
         now() - interval '2 minutes', NULL, NULL, 0),
        ('018f0000-0000-7000-8000-000000000002', 'media', 'media', 500, 'running',
         '{\"file\": \"x.png\"}', now() - interval '1 minute', 1, 5,
         NULL, '[]', NULL, 'runner-1', 1, now() - interval '30 seconds', now(),
         now() + interval '30 seconds', true, 40, 'resizing', 3,
         now() - interval '2 minutes', now() - interval '29 seconds', NULL, 2),
        ('018f0000-0000-7000-8000-000000000003', 'mail', 'default', 100, 'completed',
         '{}', now() - interval '1 hour', 1, 3,
         NULL, '[]', 'mail:b', 'runner-2', 1, now() - interval '59 minutes',
         now() - interval '59 minutes', NULL, false, 100, NULL, 0,
         now() - interval '1 hour', now() - interval '59 minutes', now() - interval '58 minutes', 0),
        ('018f0000-0000-7000-8000-000000000004', 'mail', 'default', 0, 'failed',
         '{\"to\": \"b@example.com\"}', now() - interval '1 hour', 3, 3,
         'smtp: 550', '[{\"attempt\": 3, \"error\": \"smtp: 550\"}]', NULL, 'runner-1', 3,
         now() - interval '50 minutes', now() - interval '50 minutes', NULL, false, 0, NULL, 0,
         now() - interval '2 hours', now() - interval '50 minutes', now() - interval '49 minutes', 0),
        ('018f0000-0000-7000-8000-000000000005', 'report', 'reports', 100, 'scheduled',
         '{\"month\": 11}', now() + interval '1 day', 0, 1,
         NULL, '[]', 'report:11', NULL, 0, NULL, NULL, NULL, false, 0, NULL, 0,
         now(), NULL, NULL, 0)";

/// Every row of the table as JSON, by id (column order plays no part).
fn rows(conn: &mut PgConnection) -> serde_json::Value {
    #[derive(QueryableByName)]
    struct Rows {
        #[diesel(sql_type = Text)]
        rows: String,
    }
    let all = diesel::sql_query(
        "SELECT jsonb_agg(to_jsonb(j) ORDER BY j.id)::text AS rows FROM jobqueue_jobs AS j",
    )
    .get_result::<Rows>(conn)
    .expect("read the rows");
    serde_json::from_str(&all.rows).expect("JSON")
}

/// A role of the server's for one test, dropped (with its privileges in
/// the test's database) when this value is, pass or fail.
struct Role {
    name: String,
    url: String,
}

impl Role {
    fn create(db: &TestDb) -> Self {
        let name = format!("jq_migration_{}_{}", std::process::id(), fastrand::u32(..));
        db.conn()
            .batch_execute(&format!("CREATE ROLE {name}"))
            .expect("create a role");
        Role {
            name,
            url: db.url.clone(),
        }
    }
}

impl Drop for Role {
    fn drop(&mut self) {
        let dropped = PgConnection::establish(&self.url)
            .map_err(|e| e.to_string())
            .and_then(|mut conn| {
                conn.batch_execute(&format!("DROP OWNED BY {0}; DROP ROLE {0}", self.name))
                    .map_err(|e| e.to_string())
            });
        if let Err(e) = dropped {
            eprintln!("could not drop role {}: {e}", self.name);
        }
    }
}

fn may(conn: &mut PgConnection, role: &str, privilege: &str) -> bool {
    #[derive(QueryableByName)]
    struct May {
        #[diesel(sql_type = Bool)]
        may: bool,
    }
    diesel::sql_query("SELECT has_table_privilege($1, 'jobqueue_jobs', $2) AS may")
        .bind::<Text, _>(role)
        .bind::<Text, _>(privilege)
        .get_result::<May>(conn)
        .expect("check a privilege")
        .may
}

/// The position of `column` in the row.
fn position(conn: &mut PgConnection, column: &str) -> i64 {
    scalar(
        conn,
        &format!(
            "SELECT attnum::int8 AS n FROM pg_attribute \
             WHERE attrelid = 'jobqueue_jobs'::regclass AND attname = '{column}'"
        ),
    )
}

/// Whether vacuums (autovacuum's too) shorten the jobs table on their own:
/// 1 unless its `vacuum_truncate` is off.
fn vacuum_truncates(conn: &mut PgConnection) -> i64 {
    scalar(
        conn,
        "SELECT (NOT coalesce('vacuum_truncate=false' = ANY(reloptions), false))::int4::int8 AS n \
         FROM pg_class WHERE oid = 'jobqueue_jobs'::regclass",
    )
}

fn fillfactor(conn: &mut PgConnection) -> i64 {
    scalar(
        conn,
        "SELECT coalesce((SELECT substr(o, 12)::int8 FROM unnest(reloptions) AS o \
                          WHERE o LIKE 'fillfactor=%'), 100) AS n \
         FROM pg_class WHERE oid = 'jobqueue_jobs'::regclass",
    )
}

#[test]
fn the_row_layout_migration_keeps_every_job_and_grant() {
    let db = TestDb::unmigrated();
    let mut conn = db.conn();
    let pending = SchemaVersions::new(&mut conn)
        .pending_migrations(MIGRATIONS)
        .expect("list migrations");
    for migration in pending
        .iter()
        .take_while(|m| m.name().version().to_string() != ROW_LAYOUT)
    {
        SchemaVersions::new(&mut conn)
            .run_migration(migration.as_ref())
            .expect("apply a migration");
    }
    assert!(position(&mut conn, "status") < position(&mut conn, "payload"));
    diesel::sql_query(OLD_ROWS)
        .execute(&mut conn)
        .expect("insert jobs in the old layout");
    let guard = Role::create(&db);
    let role = guard.name.as_str();
    conn.batch_execute(&format!(
        "GRANT SELECT, INSERT, UPDATE ON jobqueue_jobs TO {role}"
    ))
    .expect("grant");
    let before = rows(&mut conn);
    assert_eq!(before.as_array().map(Vec::len), Some(5));

    jobqueue_core::run_migrations(&mut conn).expect("migrate");

    let mut after = rows(&mut conn);
    // Columns later migrations add, NULL in every row that was there.
    for row in after.as_array_mut().into_iter().flatten() {
        for column in [
            "traceparent",
            "concurrency_key",
            "key_checked",
            "workflow_id",
            "tags",
            "metadata",
            "step_outputs",
            "step_cursor",
        ] {
            let added = row.as_object_mut().and_then(|row| row.remove(column));
            assert_eq!(added, Some(serde_json::Value::Null), "{column}: {row}");
        }
    }
    assert_eq!(after, before, "the copy changed a row");
    for privilege in ["SELECT", "INSERT", "UPDATE"] {
        assert!(may(&mut conn, role, privilege), "{privilege} was lost");
    }
    assert!(!may(&mut conn, role, "DELETE"), "DELETE was never granted");
    // The new layout: what the claim and completion write comes after the
    // payload, and pages keep room for the updates (half of each page, since
    // the later migration for tables that keep no completed history).
    assert!(position(&mut conn, "payload") < position(&mut conn, "status"));
    assert!(position(&mut conn, "run_at") < position(&mut conn, "status"));
    assert_eq!(fillfactor(&mut conn), 50);
    // Only runners shorten the table, now and then.
    assert_eq!(vacuum_truncates(&mut conn), 0);
    // The role that may update jobs may count completions; the completed
    // job kept is counted.
    assert!(
        scalar(
            &mut conn,
            &format!(
                "SELECT count(*) AS n FROM unnest(ARRAY['SELECT', 'INSERT', 'UPDATE', 'DELETE']) AS p
                 WHERE has_table_privilege('{role}', 'jobqueue_completions', p)"
            )
        ) == 4,
        "the completion counts were not granted"
    );
    assert_eq!(
        scalar(
            &mut conn,
            "SELECT sum(completed)::int8 AS n FROM jobqueue_completions
             WHERE queue = 'default' AND job_type = 'mail'"
        ),
        1
    );
    // The constraints and indexes are back: a second live job with a held
    // unique key is refused, a bad status too, and the pending job is claimed.
    let duplicate = diesel::sql_query(
        "INSERT INTO jobqueue_jobs (id, job_type, unique_key) \
         VALUES ('018f0000-0000-7000-8000-000000000009', 'mail', 'mail:a')",
    )
    .execute(&mut conn);
    assert!(duplicate.is_err(), "the unique-key index is missing");
    let bad_status =
        diesel::sql_query("UPDATE jobqueue_jobs SET status = 'lost'").execute(&mut conn);
    assert!(bad_status.is_err(), "the status check is missing");
    let lease = claim_one(&mut conn, "after-migration");
    assert_eq!(
        lease.job_id.to_string(),
        "018f0000-0000-7000-8000-000000000001"
    );

    // Reverting it (and any later one) keeps the rows and writes pages full
    // again.
    while SchemaVersions::new(&mut conn)
        .revert_last_migration(MIGRATIONS)
        .expect("revert")
        .to_string()
        != ROW_LAYOUT
    {}
    assert_eq!(fillfactor(&mut conn), 100);
    assert_eq!(vacuum_truncates(&mut conn), 1);
    assert_eq!(
        scalar(&mut conn, "SELECT count(*) AS n FROM jobqueue_jobs"),
        5
    );
}

/// An application's own Diesel migrations, written to a folder of their
/// own (removed when this value is dropped), as `diesel migration
/// generate` lays them out.
struct AppMigrations {
    dir: std::path::PathBuf,
}

impl AppMigrations {
    /// Two migrations, both older than every one of jobqueue's, so that a
    /// jobqueue version is the latest applied once jobqueue migrated.
    fn write() -> Self {
        let dir = std::env::temp_dir().join(format!(
            "jq_app_migrations_{}_{}",
            std::process::id(),
            fastrand::u32(..)
        ));
        for (name, up, down) in [
            (
                "2025-01-01-000000_users",
                "CREATE TABLE users (id int PRIMARY KEY, email text NOT NULL)",
                "DROP TABLE users",
            ),
            (
                "2025-06-01-000000_posts",
                "CREATE TABLE posts (id int PRIMARY KEY, user_id int REFERENCES users)",
                "DROP TABLE posts",
            ),
        ] {
            let folder = dir.join(name);
            std::fs::create_dir_all(&folder).expect("create a migration folder");
            std::fs::write(folder.join("up.sql"), up).expect("write up.sql");
            std::fs::write(folder.join("down.sql"), down).expect("write down.sql");
        }
        AppMigrations { dir }
    }

    fn source(&self) -> FileBasedMigrations {
        FileBasedMigrations::from_path(&self.dir).expect("the application's migrations")
    }
}

impl Drop for AppMigrations {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// The versions table `table` records, oldest first.
fn versions(conn: &mut PgConnection, table: &str) -> Vec<String> {
    #[derive(QueryableByName)]
    struct Version {
        #[diesel(sql_type = Text)]
        version: String,
    }
    diesel::sql_query(format!(
        "SELECT version::text AS version FROM {table} ORDER BY version"
    ))
    .load::<Version>(conn)
    .expect("read the versions")
    .into_iter()
    .map(|v| v.version)
    .collect()
}

fn has_table(conn: &mut PgConnection, table: &str) -> bool {
    scalar(
        conn,
        &format!("SELECT (to_regclass('{table}') IS NOT NULL)::int::int8 AS n"),
    ) == 1
}

/// The doctor's `migrations` check.
fn migrations_check(conn: &mut PgConnection) -> Check {
    jobqueue_core::doctor(conn, &DoctorOptions::default())
        .expect("run the doctor")
        .into_iter()
        .find(|check| check.name == "migrations")
        .expect("the migrations check")
}

const APP_VERSIONS: [&str; 2] = ["20250101000000", "20250601000000"];

/// Diesel's table holds the application's versions only, jobqueue's table
/// all of jobqueue's, and the doctor's `migrations` check is ok.
fn assert_versions_apart(conn: &mut PgConnection) {
    assert_eq!(versions(conn, "__diesel_schema_migrations"), APP_VERSIONS);
    assert_eq!(
        versions(conn, "jobqueue_schema_migrations").len(),
        jobqueue_tests::migration_count()
    );
    let check = migrations_check(conn);
    assert_eq!(check.status, CheckStatus::Ok, "{check:#?}");
}

/// jobqueue migrated into a Diesel application's database: Diesel's table
/// keeps the application's versions only, so `diesel migration revert` and
/// `redo` (Diesel's harness, as its CLI runs them) work on the application's
/// migrations as they would without jobqueue, and the doctor is quiet.
#[test]
fn an_applications_diesel_migrations_run_revert_and_redo_beside_jobqueues() {
    let db = TestDb::unmigrated();
    let mut conn = db.conn();
    let app = AppMigrations::write();
    conn.run_pending_migrations(app.source())
        .expect("diesel migration run");
    jobqueue_core::run_migrations(&mut conn).expect("migrate jobqueue");
    assert_versions_apart(&mut conn);

    // `diesel migration revert`: the application's latest, although a
    // jobqueue migration was applied after it.
    let reverted = conn
        .revert_last_migration(app.source())
        .expect("diesel migration revert");
    assert_eq!(reverted.to_string(), APP_VERSIONS[1]);
    assert!(!has_table(&mut conn, "posts"));
    // `diesel migration redo`: revert, then run again.
    conn.run_pending_migrations(app.source())
        .expect("diesel migration run");
    let reverted = conn
        .revert_last_migration(app.source())
        .expect("diesel migration redo's revert");
    assert_eq!(reverted.to_string(), APP_VERSIONS[1]);
    conn.run_next_migration(app.source())
        .expect("diesel migration redo's run");
    assert!(has_table(&mut conn, "posts"));
    assert_eq!(
        versions(&mut conn, "__diesel_schema_migrations"),
        APP_VERSIONS
    );
    assert!(
        jobqueue_core::pending_migrations(&mut conn)
            .expect("read")
            .is_empty()
    );
    assert_eq!(
        jobqueue_core::run_migrations(&mut conn).expect("migrate"),
        Vec::<String>::new()
    );
    let check = migrations_check(&mut conn);
    assert_eq!(check.status, CheckStatus::Ok, "{check:#?}");
}

/// A database whose jobqueue versions an older jobqueue recorded in
/// Diesel's table, beside the application's: read as applied (a runner
/// starts, no version is taken for a newer jobqueue's), the doctor says
/// where they are, and the next migration run moves them to jobqueue's
/// table, applying nothing; then the application's revert works.
#[test]
fn versions_recorded_in_diesels_table_by_an_older_jobqueue_are_moved_to_jobqueues() {
    let db = TestDb::unmigrated();
    let mut conn = db.conn();
    let app = AppMigrations::write();
    conn.run_pending_migrations(app.source())
        .expect("diesel migration run");
    // As jobqueue recorded its versions before: Diesel's harness on
    // Diesel's table.
    conn.run_pending_migrations(MIGRATIONS)
        .expect("migrate as an older jobqueue did");
    assert!(
        jobqueue_core::pending_migrations(&mut conn)
            .expect("read")
            .is_empty()
    );
    let check = migrations_check(&mut conn);
    assert_eq!(check.status, CheckStatus::Warn, "{check:#?}");
    assert!(
        check.evidence.contains(&format!(
            "{} of them recorded in the application's Diesel table",
            jobqueue_tests::migration_count()
        )) && check.advice.contains("run `jobqueue migrate`"),
        "{check:#?}"
    );
    // What the move is for: Diesel cannot revert past a version that is
    // not the application's.
    assert!(conn.revert_last_migration(app.source()).is_err());

    assert_eq!(
        jobqueue_core::run_migrations(&mut conn).expect("migrate"),
        Vec::<String>::new(),
        "nothing applied, only moved"
    );
    assert_versions_apart(&mut conn);
    let reverted = conn
        .revert_last_migration(app.source())
        .expect("diesel migration revert");
    assert_eq!(reverted.to_string(), APP_VERSIONS[1]);
}
