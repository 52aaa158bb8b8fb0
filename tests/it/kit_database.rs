//! The testing kit's databases: a template migrated once, copied per test,
//! with the application's own migrations in it.

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use diesel::prelude::*;
use diesel_migrations::FileBasedMigrations;
use jobqueue::testing::{Template, TestDatabaseError};
use jobqueue_tests::{exec, scalar, server_url};

fn database_exists(name: &str) -> bool {
    let mut admin = PgConnection::establish(server_url()).expect("the server");
    scalar(
        &mut admin,
        &format!("SELECT count(*) AS n FROM pg_database WHERE datname = '{name}'"),
    ) == 1
}

/// Drops the template `name` if the server has it.
fn drop_template(name: &str) {
    let mut admin = PgConnection::establish(server_url()).expect("the server");
    if scalar(
        &mut admin,
        &format!("SELECT count(*) AS n FROM pg_database WHERE datname = '{name}'"),
    ) == 1
    {
        exec(
            &mut admin,
            &format!("ALTER DATABASE {name} IS_TEMPLATE false"),
        );
        exec(&mut admin, &format!("DROP DATABASE {name}"));
    }
}

/// A Diesel migrations folder with one migration per `(name, sql)`.
fn migrations(dir: &Path, all: &[(&str, &str)]) -> FileBasedMigrations {
    for (name, sql) in all {
        let folder = dir.join(name);
        std::fs::create_dir_all(&folder).expect("a migration's folder");
        std::fs::write(folder.join("up.sql"), sql).expect("up.sql");
        std::fs::write(folder.join("down.sql"), "SELECT 1").expect("down.sql");
    }
    FileBasedMigrations::from_path(dir).expect("a migrations folder")
}

#[test]
fn each_test_gets_a_migrated_database_of_its_own_dropped_with_it() {
    let template = Template::new(server_url());
    let a = template.database().expect("a database");
    let b = template.database().expect("another");
    assert_ne!(a.name(), b.name());
    let mut in_a = a.connect().expect("connect");
    let mut in_b = b.connect().expect("connect");
    // Migrated: jobqueue's tables are there, and its versions recorded.
    let versions = "SELECT count(*) AS n FROM jobqueue_schema_migrations";
    assert_eq!(
        scalar(&mut in_a, versions),
        jobqueue_tests::migration_count() as i64
    );
    // Of its own: a job committed in one is not in the other.
    exec(
        &mut in_a,
        "INSERT INTO jobqueue_jobs (id, job_type, queue, payload) VALUES (gen_random_uuid(), 't', 'q', '{}')",
    );
    assert_eq!(
        scalar(&mut in_a, "SELECT count(*) AS n FROM jobqueue_jobs"),
        1
    );
    assert_eq!(
        scalar(&mut in_b, "SELECT count(*) AS n FROM jobqueue_jobs"),
        0
    );
    // Gone with its value, even with a session still on it.
    let name = a.name().to_owned();
    drop(a);
    assert!(!database_exists(&name), "{name} dropped");
    drop(in_a);
    // What a copy costs (printed, not asserted: a shared machine's timing).
    let copies = 10;
    let started = Instant::now();
    for _ in 0..copies {
        drop(template.database().expect("a database"));
    }
    eprintln!(
        "a test database, copied and dropped: {:.1} ms each",
        started.elapsed().as_secs_f64() * 1000.0 / f64::from(copies)
    );
}

#[test]
fn an_applications_migrations_are_in_its_template_and_a_new_one_makes_a_new_template() {
    let dir = std::env::temp_dir().join(format!("jq-kit-migrations-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let accounts = (
        "2027-01-01-000000_accounts",
        "CREATE TABLE accounts (id serial PRIMARY KEY, email text NOT NULL)",
    );
    let one = Template::new(server_url()).migrations(migrations(&dir, &[accounts]));
    let db = one.database().expect("a database");
    let mut conn = db.connect().expect("connect");
    exec(
        &mut conn,
        "INSERT INTO accounts (email) VALUES ('ada@example.com')",
    );
    exec(
        &mut conn,
        "INSERT INTO jobqueue_jobs (id, job_type, queue, payload) VALUES (gen_random_uuid(), 't', 'q', '{}')",
    );
    // The application's version in Diesel's table, jobqueue's in its own.
    assert_eq!(
        scalar(
            &mut conn,
            "SELECT count(*) AS n FROM __diesel_schema_migrations WHERE version = '20270101000000'"
        ),
        1
    );
    assert_ne!(one.name(), Template::new(server_url()).name());
    // A second migration: another template, with both tables.
    let orders = (
        "2027-02-01-000000_orders",
        "CREATE TABLE orders (id serial PRIMARY KEY, account int REFERENCES accounts)",
    );
    let two = Template::new(server_url()).migrations(migrations(&dir, &[accounts, orders]));
    assert_ne!(one.name(), two.name());
    let db = two.database().expect("a database");
    let mut conn = db.connect().expect("connect");
    assert_eq!(scalar(&mut conn, "SELECT count(*) AS n FROM orders"), 0);
    assert_eq!(scalar(&mut conn, "SELECT count(*) AS n FROM accounts"), 0);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn tests_that_start_at_once_wait_for_one_build_of_the_template() {
    let builds = Arc::new(AtomicUsize::new(0));
    let counted = Arc::clone(&builds);
    let template = Template::new(server_url()).setup("kit_database: built once", move |conn| {
        counted.fetch_add(1, Ordering::SeqCst);
        // The build goes on once the three other starts wait for its lock.
        let waiting = jobqueue_tests::poll_until(Duration::from_secs(30), || {
            scalar(
                conn,
                "SELECT count(*) AS n FROM pg_locks WHERE locktype = 'advisory' AND NOT granted",
            ) >= 3
        });
        if waiting {
            Ok(())
        } else {
            Err("the other starts never waited for the template's lock".into())
        }
    });
    drop_template(&template.name());
    let names: Vec<String> = std::thread::scope(|scope| {
        let starts: Vec<_> = (0..4)
            .map(|_| scope.spawn(|| template.database().expect("a database")))
            .collect();
        starts
            .into_iter()
            .map(|start| {
                let db = start.join().expect("a thread");
                db.name().to_owned()
            })
            .collect()
    });
    assert_eq!(builds.load(Ordering::SeqCst), 1, "one build for {names:?}");
    drop_template(&template.name());
}

#[test]
fn a_bad_server_is_named_in_the_error() {
    let not_a_url = Template::new("host").database();
    let error = not_a_url.expect_err("not a URL").to_string();
    assert!(
        error.contains("cannot name a test database") && error.contains("`host` has no value"),
        "{error}"
    );
    // Either form of URL: named in the error, its password left out.
    for (url, shown) in [
        (
            "postgres://who:secret@127.0.0.1:1/app",
            "postgres://who:***@127.0.0.1:1/app",
        ),
        (
            "host=127.0.0.1 port=1 user=who password=secret dbname=app",
            "127.0.0.1",
        ),
    ] {
        match Template::new(url).database() {
            Err(e @ TestDatabaseError::Connect { .. }) => {
                let error = e.to_string();
                assert!(error.contains(shown), "{error}");
                assert!(!error.contains("secret"), "{error}");
            }
            other => panic!("a connection error for {url}, not {other:?}"),
        }
    }
}
