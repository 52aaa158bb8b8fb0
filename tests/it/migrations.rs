//! The schema's migrations on a database that already holds jobs.
//!
//! The row-layout migration copies `jobqueue_jobs` (PostgreSQL cannot
//! reorder columns in place): every row, every value and every grant must
//! survive it, and the queue must work on the copy.

use diesel::connection::SimpleConnection;
use diesel::prelude::*;
use diesel::sql_types::{Bool, Text};
use diesel_migrations::MigrationHarness;
use jobqueue_core::MIGRATIONS;
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
    let pending = conn
        .pending_migrations(MIGRATIONS)
        .expect("list migrations");
    for migration in pending
        .iter()
        .take_while(|m| m.name().version().to_string() != ROW_LAYOUT)
    {
        conn.run_migration(migration.as_ref())
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
    while conn
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
