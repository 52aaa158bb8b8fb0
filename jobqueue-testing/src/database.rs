//! A database of its own for each test: a copy of a template database that
//! was migrated once, dropped when the test is done.
//!
//! Copying a migrated template (`CREATE DATABASE … TEMPLATE`) costs a few
//! tens of milliseconds whatever the migrations do, so each test gets a
//! database no other test touches (its runners, its committed jobs, its
//! `LISTEN`s) without paying for the migrations again. The template is
//! named by a digest of what built it: jobqueue's migrations, the
//! application's, and the keys of its own setup steps, so a new migration
//! gets a new template and a template is never used half-built.

use std::collections::HashSet;
use std::error::Error as StdError;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use diesel::migration::{Migration, MigrationSource};
use diesel::pg::Pg;
use diesel::prelude::*;
use diesel::sql_types::Text;
use diesel_migrations::MigrationHarness;
use jobqueue_core::redact_url;

/// Why a test database could not be made.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TestDatabaseError {
    /// `DATABASE_URL` is not set: the kit does not know which server to
    /// make test databases on.
    #[error(
        "DATABASE_URL is not set: set it to a PostgreSQL server's URL (any database \
         on it; the tests' databases are made beside it), or give the URL to \
         Template::new"
    )]
    NoServer,
    /// The server's URL cannot name a test database (the test databases'
    /// URLs are made from it).
    #[error("cannot name a test database in the server's URL {url}: {reason}")]
    BadUrl {
        /// The URL (its password left out).
        url: String,
        /// What is wrong with it.
        reason: String,
    },
    /// No connection to the server.
    #[error("cannot connect to the test server {url}: {source}")]
    Connect {
        /// The URL (its password left out).
        url: String,
        /// Why.
        source: ConnectionError,
    },
    /// A statement on the server failed (the role may lack `CREATEDB`).
    #[error("{what}: {source}")]
    Query {
        /// What it was for.
        what: String,
        /// The database's error.
        source: diesel::result::Error,
    },
    /// jobqueue's migrations, the application's or a setup step failed on
    /// the template being built (it is left unnamed: the next run builds
    /// it again).
    #[error("building the test template {template}: {source}")]
    Setup {
        /// The template's name.
        template: String,
        /// What failed.
        source: Box<dyn StdError + Send + Sync>,
    },
}

type Setup = dyn Fn(&mut PgConnection) -> Result<(), Box<dyn StdError + Send + Sync>> + Send + Sync;

/// A migrated template database, and the test databases copied from it.
///
/// ```no_run
/// use jobqueue_testing::Template;
/// # const MIGRATIONS: diesel_migrations::EmbeddedMigrations =
/// #     diesel_migrations::EmbeddedMigrations::new(&[]);
///
/// // jobqueue's migrations and the application's (`embed_migrations!()`),
/// // on the server of DATABASE_URL; built once, copied per test.
/// let template = Template::from_env()?.migrations(MIGRATIONS);
/// let db = template.database()?;
/// let mut conn = db.connect()?;
/// // ... the test; the database is dropped with `db`.
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone)]
pub struct Template {
    server: String,
    /// What builds it, each step with the words its digest is made of.
    steps: Vec<(String, Arc<Setup>)>,
}

impl std::fmt::Debug for Template {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Template")
            .field("server", &redact_url(&self.server))
            .field("name", &self.name())
            .finish()
    }
}

impl Template {
    /// A template with jobqueue's migrations, on the server `server_url`
    /// names (a `postgres://` URL of any database on it; the role needs
    /// `CREATEDB`).
    pub fn new(server_url: impl Into<String>) -> Self {
        let jobqueue = migration_names(&jobqueue_core::MIGRATIONS);
        Template {
            server: server_url.into(),
            steps: vec![(
                format!("jobqueue {} {jobqueue}", jobqueue_core::VERSION),
                Arc::new(|conn: &mut PgConnection| {
                    jobqueue_core::run_migrations(conn)?;
                    Ok(())
                }),
            )],
        }
    }

    /// [`Template::new`] on the server of `DATABASE_URL`.
    pub fn from_env() -> Result<Self, TestDatabaseError> {
        match std::env::var("DATABASE_URL") {
            Ok(url) if !url.trim().is_empty() => Ok(Self::new(url)),
            _ => Err(TestDatabaseError::NoServer),
        }
    }

    /// Runs the application's migrations on the template too, after
    /// jobqueue's. The template is named by the migrations' names: a new
    /// migration makes a new template (one edited in place, under its old
    /// name, is not noticed: give it a new name, or a [`Template::setup`]
    /// key of its content).
    pub fn migrations<S>(mut self, source: S) -> Self
    where
        S: MigrationSource<Pg> + Send + Sync + 'static,
    {
        let names = migration_names(&source);
        let source = Arc::new(source);
        self.steps.push((
            format!("migrations {names}"),
            Arc::new(move |conn: &mut PgConnection| {
                conn.run_pending_migrations(Shared(&*source))?;
                Ok(())
            }),
        ));
        self
    }

    /// Runs `step` on the template after the migrations (reference data,
    /// say). `key` names what it does: a new key makes a new template.
    pub fn setup<F>(mut self, key: &str, step: F) -> Self
    where
        F: Fn(&mut PgConnection) -> Result<(), Box<dyn StdError + Send + Sync>>
            + Send
            + Sync
            + 'static,
    {
        self.steps.push((format!("setup {key}"), Arc::new(step)));
        self
    }

    /// The template database's name: `jq_template_` and a digest of its
    /// steps.
    pub fn name(&self) -> String {
        // FNV-1a, 64 bits: stable across builds and platforms.
        let mut digest: u64 = 0xcbf2_9ce4_8422_2325;
        for (words, _) in &self.steps {
            for byte in words.bytes().chain([0]) {
                digest = (digest ^ u64::from(byte)).wrapping_mul(0x0100_0000_01b3);
            }
        }
        format!("jq_template_{digest:016x}")
    }

    /// A new database for one test, copied from the template, which is
    /// built first if the server has none of that name (looked for once
    /// per process; test processes that start at once wait for one build).
    pub fn database(&self) -> Result<TestDatabase, TestDatabaseError> {
        let template = self.name();
        let mut admin = self.admin()?;
        self.ensure(&mut admin, &template)?;
        let name = fresh_name();
        let copy = format!("CREATE DATABASE {name} TEMPLATE {template}");
        if exec(&mut admin, &copy, "copying the test template").is_err() {
            // Dropped since this process looked (`prune_others` on a server
            // shared with other migrations): built again, once.
            forget(&template);
            self.ensure(&mut admin, &template)?;
            exec(&mut admin, &copy, "copying the test template")?;
        }
        Ok(TestDatabase {
            url: with_database(&self.server, &name)?,
            server: self.server.clone(),
            name,
        })
    }

    /// Builds the template now unless the server has it (as
    /// [`Template::database`] does first). Returns whether it built it.
    pub fn prepare(&self) -> Result<bool, TestDatabaseError> {
        self.ensure(&mut self.admin()?, &self.name())
    }

    /// Drops the templates of other steps (`jq_template_*` but this one's)
    /// that no copy is being made of: those of migrations since replaced.
    /// Only on request, as a server may serve several applications' tests.
    /// Returns how many it dropped.
    pub fn prune_others(&self) -> Result<usize, TestDatabaseError> {
        #[derive(QueryableByName)]
        struct Name {
            #[diesel(sql_type = Text)]
            datname: String,
        }
        let mut admin = self.admin()?;
        let others: Vec<Name> = diesel::sql_query(
            "SELECT datname FROM pg_database \
             WHERE datname LIKE 'jq\\_template\\_%' AND datistemplate AND datname <> $1",
        )
        .bind::<Text, _>(self.name())
        .load(&mut admin)
        .map_err(|source| TestDatabaseError::Query {
            what: "listing the test templates".to_owned(),
            source,
        })?;
        let mut dropped = 0;
        for Name { datname } in others {
            // A refusal (a copy of it under way) leaves it for next time.
            let gone = exec(
                &mut admin,
                &format!("ALTER DATABASE {datname} IS_TEMPLATE false"),
                "",
            )
            .and_then(|()| {
                exec(
                    &mut admin,
                    &format!("DROP DATABASE IF EXISTS {datname}"),
                    "",
                )
            });
            dropped += usize::from(gone.is_ok());
        }
        Ok(dropped)
    }

    fn admin(&self) -> Result<PgConnection, TestDatabaseError> {
        admin(&self.server)
    }

    /// Builds the template `name` unless it exists. Under an advisory lock,
    /// so processes starting at once wait for one build; built under a
    /// scratch name and renamed when complete, so a build cut short leaves
    /// no half-built template; closed to connections, so a copy never meets
    /// a session on it.
    fn ensure(&self, admin: &mut PgConnection, name: &str) -> Result<bool, TestDatabaseError> {
        if known(name) {
            return Ok(false);
        }
        // The lock is the session's: a process that dies holding it lets go.
        exec(
            admin,
            &format!("SELECT pg_advisory_lock({LOCK})"),
            "locking the test template",
        )?;
        let built = self.build(admin, name);
        let unlocked = exec(
            admin,
            &format!("SELECT pg_advisory_unlock({LOCK})"),
            "unlocking",
        );
        let built = built?;
        unlocked?;
        remember(name);
        Ok(built)
    }

    /// Builds the template `name` if the server has none; true if it did.
    fn build(&self, admin: &mut PgConnection, name: &str) -> Result<bool, TestDatabaseError> {
        #[derive(QueryableByName)]
        struct Found {
            #[diesel(sql_type = diesel::sql_types::BigInt)]
            n: i64,
        }
        let found: Found =
            diesel::sql_query("SELECT count(*) AS n FROM pg_database WHERE datname = $1")
                .bind::<Text, _>(name)
                .get_result(admin)
                .map_err(|source| TestDatabaseError::Query {
                    what: "looking for the test template".to_owned(),
                    source,
                })?;
        if found.n == 1 {
            return Ok(false);
        }
        let building = format!("{name}_building");
        let what = "making the test template";
        exec(
            admin,
            &format!("DROP DATABASE IF EXISTS {building} WITH (FORCE)"),
            what,
        )?;
        exec(admin, &format!("CREATE DATABASE {building}"), what)?;
        {
            let url = with_database(&self.server, &building)?;
            let mut conn =
                PgConnection::establish(&url).map_err(|source| TestDatabaseError::Connect {
                    url: redact_url(&url),
                    source,
                })?;
            for (_, step) in &self.steps {
                step(&mut conn).map_err(|source| TestDatabaseError::Setup {
                    template: name.to_owned(),
                    source,
                })?;
            }
        }
        exec(
            admin,
            &format!("ALTER DATABASE {building} RENAME TO {name}"),
            what,
        )?;
        exec(
            admin,
            &format!("ALTER DATABASE {name} WITH IS_TEMPLATE true ALLOW_CONNECTIONS false"),
            what,
        )?;
        Ok(true)
    }
}

/// A database of one test's own, copied from a [`Template`]; dropped (its
/// sessions ended) when this value is.
#[derive(Debug)]
pub struct TestDatabase {
    url: String,
    server: String,
    name: String,
}

impl TestDatabase {
    /// A database copied from jobqueue's migrated template on the server
    /// of `DATABASE_URL` ([`Template::from_env`]); one with the
    /// application's migrations too is [`Template::database`]'s.
    pub fn new() -> Result<Self, TestDatabaseError> {
        Template::from_env()?.database()
    }

    /// Its URL: the server's, with this database's name.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// Its name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// A new connection to it (no test transaction: what the test commits
    /// stays until the database is dropped; [`crate::connect`] opens one
    /// that rolls back).
    pub fn connect(&self) -> Result<PgConnection, TestDatabaseError> {
        PgConnection::establish(&self.url).map_err(|source| TestDatabaseError::Connect {
            url: redact_url(&self.url),
            source,
        })
    }
}

impl Drop for TestDatabase {
    fn drop(&mut self) {
        let dropped = admin(&self.server).and_then(|mut admin| {
            exec(
                &mut admin,
                &format!("DROP DATABASE IF EXISTS {} WITH (FORCE)", self.name),
                "dropping the test database",
            )
        });
        if let Err(e) = dropped {
            // Drop cannot fail: say what is left behind.
            eprintln!(
                "jobqueue testing: test database {} left on the server: {e}",
                self.name
            );
        }
    }
}

/// A connection to the server of `server`: its database, else `postgres`
/// (a test URL may name a database that is not there yet).
fn admin(server: &str) -> Result<PgConnection, TestDatabaseError> {
    PgConnection::establish(server).or_else(|first| {
        PgConnection::establish(&with_database(server, "postgres")?).map_err(|_| {
            TestDatabaseError::Connect {
                url: redact_url(server),
                source: first,
            }
        })
    })
}

/// The advisory lock the template builds take turns under.
const LOCK: i64 = 7_150_000_049;

/// The templates this process found or built.
fn templates() -> std::sync::MutexGuard<'static, HashSet<String>> {
    static KNOWN: OnceLock<Mutex<HashSet<String>>> = OnceLock::new();
    KNOWN
        .get_or_init(|| Mutex::new(HashSet::new()))
        .lock()
        .unwrap_or_else(|e| e.into_inner())
}

fn known(name: &str) -> bool {
    templates().contains(name)
}

fn remember(name: &str) {
    templates().insert(name.to_owned());
}

fn forget(name: &str) {
    templates().remove(name);
}

/// A name no other test database has: the process, a count, a random part
/// (another machine's process may have the same id).
fn fresh_name() -> String {
    static COUNT: AtomicU32 = AtomicU32::new(0);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    format!(
        "jq_test_{}_{}_{nanos:x}",
        std::process::id(),
        COUNT.fetch_add(1, Ordering::Relaxed)
    )
}

fn exec(conn: &mut PgConnection, sql: &str, what: &str) -> Result<(), TestDatabaseError> {
    diesel::sql_query(sql)
        .execute(conn)
        .map(drop)
        .map_err(|source| TestDatabaseError::Query {
            what: what.to_owned(),
            source,
        })
}

/// The migrations' names, in order, as one string.
fn migration_names<S: MigrationSource<Pg>>(source: &S) -> String {
    source
        .migrations()
        .map(|all| {
            let mut names: Vec<String> = all.iter().map(|m| m.name().to_string()).collect();
            names.sort();
            names.join(" ")
        })
        .unwrap_or_else(|e| format!("unreadable: {e}"))
}

/// A migration source lent to the harness, which takes one by value.
struct Shared<'a, S>(&'a S);

impl<S: MigrationSource<Pg>> MigrationSource<Pg> for Shared<'_, S> {
    fn migrations(&self) -> diesel::migration::Result<Vec<Box<dyn Migration<Pg>>>> {
        self.0.migrations()
    }
}

/// `url` (a URI or a key/value string) with its database replaced by
/// `database`.
fn with_database(url: &str, database: &str) -> Result<String, TestDatabaseError> {
    jobqueue_core::engine::with_database(url, database).map_err(|e| TestDatabaseError::BadUrl {
        url: redact_url(url),
        reason: e.to_string(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_database_is_put_in_the_url_keeping_its_parameters() {
        let url = "postgres://u:p@h:5/app?sslmode=disable";
        assert_eq!(
            with_database(url, "t").expect("a URL"),
            "postgres://u:p@h:5/t?sslmode=disable"
        );
        assert_eq!(
            with_database("postgresql://h", "t").expect("a URL"),
            "postgresql://h/t"
        );
        assert_eq!(
            with_database("host=h dbname=x", "t").expect("a key/value URL"),
            "host='h' dbname='t'"
        );
        assert!(matches!(
            with_database("host", "t"),
            Err(TestDatabaseError::BadUrl { .. })
        ));
        assert_eq!(redact_url(url), "postgres://u:***@h:5/app?sslmode=disable");
    }

    #[test]
    fn a_template_is_named_by_what_builds_it() {
        let plain = Template::new("postgres://h/app");
        let seeded = plain.clone().setup("seed 1", |_| Ok(()));
        let reseeded = plain.clone().setup("seed 2", |_| Ok(()));
        assert_ne!(plain.name(), seeded.name());
        assert_ne!(seeded.name(), reseeded.name());
        assert_eq!(
            seeded.name(),
            Template::new("postgres://other/db")
                .setup("seed 1", |_| Ok(()))
                .name(),
            "the server is not part of the name"
        );
        assert!(plain.name().len() <= 63, "a PostgreSQL name");
    }
}
