//! The code of the README and of the guide (`docs/src/`), compiled and
//! run: every ```rust block of README.md (but the quick start's, which
//! `tests/it/quickstart.rs` builds as a crate of its own) and of the guide's
//! pages is an excerpt of this file, `tests/embedded.rs`,
//! `examples/app_worker.rs`, `examples/async_signup.rs` or
//! `tests/it/async_patterns.rs` (checked below, line by line), and the tests
//! (here, `tests/it/async_signup.rs` and `tests/it/async_patterns.rs`) run what
//! the blocks show against a real database.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use diesel::sql_types::{BigInt, Text};
use jobqueue::{Registry, Runner, RunnerConfig};
use jobqueue_tests::{TestDb, count_where, markdown, wait_for};

// ---- what the blocks assume the application has ----

/// The application's mail client: made once at start, shared by handlers.
struct Mailer {
    sent: Arc<Mutex<Vec<String>>>,
}

impl Mailer {
    fn send(&self, to: &str, subject: &str) -> Result<(), std::io::Error> {
        if !to.contains('@') {
            return Err(std::io::Error::other(format!("no such mailbox: {to}")));
        }
        let mut sent = self
            .sent
            .lock()
            .map_err(|_| std::io::Error::other("poisoned"))?;
        sent.push(format!("{to}: {subject}"));
        Ok(())
    }
}

/// The application's own table.
fn insert_user(conn: &mut diesel::PgConnection, email: &str) -> diesel::QueryResult<i64> {
    #[derive(diesel::QueryableByName)]
    struct Id {
        #[diesel(sql_type = BigInt)]
        id: i64,
    }
    diesel::sql_query("INSERT INTO users (email) VALUES ($1) RETURNING id")
        .bind::<Text, _>(email)
        .get_result::<Id>(conn)
        .map(|row| row.id)
}

// ---- the guide: "Getting started" ----

use jobqueue::{Job, JobContext, JobError, Perform}; // Job: the trait and its derive
use serde::{Deserialize, Serialize};

#[derive(Serialize, Deserialize, Job)]
#[job(type = "email.send", priority = 150, queue = "mail", max_attempts = 5)]
struct SendEmail {
    to: String,
    subject: String,
}

impl Perform for SendEmail {
    fn perform(&self, ctx: &mut JobContext<'_>) -> Result<(), JobError> {
        ctx.progress(50, "sending")?;
        let mailer = ctx.state::<Mailer>()?; // the application's state, by type
        mailer.send(&self.to, &self.subject)?; // any error: retried with backoff
        Ok(())
    }
}

use diesel::prelude::*;

/// In the web request: the job exists if and only if the transaction commits.
fn sign_up(conn: &mut PgConnection, email: &str) -> QueryResult<i64> {
    conn.transaction(|conn| {
        let user_id = insert_user(conn, email)?;
        SendEmail {
            to: email.into(),
            subject: "Welcome".into(),
        }
        .enqueue(conn)?;
        // One digest queued at a time: while one waits, this enqueue finds
        // it and inserts nothing (an outcome, not an error), and the
        // sign-up commits.
        SendEmail {
            to: "ops@example.com".into(),
            subject: "New users".into(),
        }
        .options()
        .priority(500)
        .delay(Duration::from_secs(60))
        .unique_key("ops-digest")
        .enqueue(conn)?;
        Ok(user_id)
    })
}

use jobqueue::{EnqueueOutcome, JobId};

/// An application's own error type absorbs both with `#[from]`.
#[derive(Debug, thiserror::Error)]
enum AppError {
    #[error(transparent)]
    Db(#[from] diesel::result::Error),
    #[error(transparent)]
    Queue(#[from] jobqueue::Error),
}

fn sign_up_checked(conn: &mut PgConnection, email: &str) -> Result<(i64, JobId), AppError> {
    conn.transaction(|conn| {
        let user_id = insert_user(conn, email)?;
        let welcome = SendEmail {
            to: email.into(),
            subject: "Welcome".into(),
        };
        let outcome = welcome
            .options()
            .unique_key(format!("welcome:{email}"))
            .enqueue(conn)?;
        if let EnqueueOutcome::Duplicate(queued) = &outcome {
            log::info!("{email} already has a welcome queued: {}", queued.existing);
        }
        Ok((user_id, outcome.id()))
    })
}

// ---- the tests ----

fn setup() -> (TestDb, PgConnection) {
    let (db, mut conn) = TestDb::connected();
    diesel::sql_query("CREATE TABLE users (id bigserial PRIMARY KEY, email text UNIQUE NOT NULL)")
        .execute(&mut conn)
        .expect("create users");
    (db, conn)
}

fn config(db: &TestDb) -> RunnerConfig {
    let mut config = RunnerConfig::new(&db.url)
        .keep_completed(jobqueue_tests::KEEP_COMPLETED)
        .concurrency(2);
    config.poll_interval = Duration::from_millis(100);
    config
}

#[test]
fn the_transactional_enqueue_commits_or_rolls_back_with_the_users_work() {
    let (_db, mut conn) = setup();
    sign_up(&mut conn, "a@example.com").expect("sign up");
    assert_eq!(count_where(&mut conn, "job_type = 'email.send'"), 2);
    let row: (String, i32, i32) = diesel::sql_query(
        "SELECT queue, priority, max_attempts FROM jobqueue_jobs WHERE payload->>'to' = 'a@example.com'",
    )
    .get_result::<QueueRow>(&mut conn)
    .map(|r| (r.queue, r.priority, r.max_attempts))
    .expect("the welcome job");
    assert_eq!(
        row,
        ("mail".to_owned(), 150, 5),
        "the derive's declarations"
    );

    // The same address again: the user insert fails, and neither job exists.
    let err = sign_up(&mut conn, "a@example.com").expect_err("duplicate user");
    assert!(
        matches!(
            err,
            diesel::result::Error::DatabaseError(
                diesel::result::DatabaseErrorKind::UniqueViolation,
                _
            )
        ),
        "{err:?}"
    );
    assert_eq!(count_where(&mut conn, "job_type = 'email.send'"), 2);

    // A second sign-up while the digest waits: the digest's enqueue finds
    // the queued one and inserts nothing, and the sign-up still commits.
    sign_up(&mut conn, "b@example.com").expect("a duplicate key is not an error");
    assert_eq!(
        count_where(&mut conn, "job_type = 'email.send'"),
        3,
        "b's welcome, no second digest"
    );
    assert_eq!(count_where(&mut conn, "unique_key = 'ops-digest'"), 1);
    let users: i64 = jobqueue_tests::scalar(&mut conn, "SELECT count(*) AS n FROM users");
    assert_eq!(users, 2, "a's and b's sign-ups committed");
}

#[derive(diesel::QueryableByName)]
struct QueueRow {
    #[diesel(sql_type = Text)]
    queue: String,
    #[diesel(sql_type = diesel::sql_types::Integer)]
    priority: i32,
    #[diesel(sql_type = diesel::sql_types::Integer)]
    max_attempts: i32,
}

#[test]
fn an_applications_own_error_type_absorbs_both() {
    let (_db, mut conn) = setup();
    let (_, welcome) = sign_up_checked(&mut conn, "c@example.com").expect("sign up");
    assert!(matches!(
        sign_up_checked(&mut conn, "c@example.com"),
        Err(AppError::Db(_))
    ));
    diesel::sql_query("DELETE FROM users")
        .execute(&mut conn)
        .expect("forget the user");
    // Signed up again while the first welcome is queued: the user row
    // commits, and the outcome names the queued welcome.
    let (_, again) = sign_up_checked(&mut conn, "c@example.com").expect("sign up again");
    assert_eq!(again, welcome, "the queued welcome stands for both");
    assert_eq!(
        jobqueue_tests::scalar(&mut conn, "SELECT count(*) AS n FROM users"),
        1
    );
    assert_eq!(
        count_where(&mut conn, "unique_key = 'welcome:c@example.com'"),
        1
    );
    // The queue's own errors reach the application's type through `?`.
    let too_big = SendEmail {
        to: "x".repeat(2 << 20),
        subject: "Welcome".into(),
    };
    let err: AppError = too_big.enqueue(&mut conn).expect_err("over 1 MiB").into();
    assert!(
        matches!(
            err,
            AppError::Queue(jobqueue_core::Error::PayloadTooLarge { .. })
        ),
        "{err:?}"
    );
}

#[test]
fn the_handler_reaches_the_applications_state_and_retries_on_its_errors() {
    let (db, mut conn) = setup();
    sign_up(&mut conn, "d@example.com").expect("sign up");
    let bad = SendEmail {
        to: "nobody".into(),
        subject: "x".into(),
    }
    .enqueue(&mut conn)
    .expect("enqueue")
    .id();
    let sent = Arc::new(Mutex::new(Vec::new()));
    let mailer = Mailer {
        sent: Arc::clone(&sent),
    };
    // State is found by its type: the handler asks for `Mailer`, so an
    // `Arc<Mailer>` is not it, and the attempt fails saying what is missing.
    let registry = Registry::new()
        .state(Arc::new(Mailer {
            sent: Arc::clone(&sent),
        }))
        .register::<SendEmail>();
    let runner = Runner::new(config(&db), registry).start().expect("start");
    wait_for(
        "an attempt without the state",
        Duration::from_secs(20),
        || {
            count_where(
                &mut conn,
                "last_error LIKE '%no application state of type%Mailer%'",
            ) >= 1
        },
    );
    runner.shutdown();
    assert!(sent.lock().expect("lock").is_empty());

    let mut config = config(&db);
    config.retry = jobqueue_core::RetryPolicy {
        base: Duration::from_millis(10),
        max: Duration::from_millis(10),
        jitter: 0.0,
    };
    diesel::sql_query(
        "UPDATE jobqueue_jobs SET run_at = now(), status = 'pending' WHERE status = 'scheduled'",
    )
    .execute(&mut conn)
    .expect("make due");
    let registry = Registry::new().state(mailer).register::<SendEmail>();
    let runner = Runner::new(config, registry).start().expect("start");
    wait_for("both good mails sent", Duration::from_secs(20), || {
        count_where(&mut conn, "status = 'completed'") == 2
    });
    // Two failed attempts on the address, each kept in the job's error
    // history (the attempt count alone can go down again: a job claimed
    // but not started when the runner shuts down gets its attempt back).
    wait_for("the bad address retried", Duration::from_secs(20), || {
        count_where(
            &mut conn,
            &format!(
                "id = '{bad}' AND (SELECT count(*) FROM jsonb_array_elements(errors) AS e \
                 WHERE e->>'error' LIKE 'no such mailbox%') >= 2"
            ),
        ) == 1
    });
    runner.shutdown();
    let row = jobqueue_core::get_job(&mut conn, bad)
        .expect("read")
        .found()
        .expect("row");
    // An io::Error through `?` is a retry (a permanent error would have
    // failed the job at its first attempt).
    let mailbox_errors = row.errors.as_array().map_or(0, |errors| {
        errors
            .iter()
            .filter(|e| {
                e["error"]
                    .as_str()
                    .is_some_and(|e| e.starts_with("no such mailbox"))
            })
            .count()
    });
    assert!(mailbox_errors >= 2, "{row:?}");
    assert!(
        row.last_error
            .as_deref()
            .unwrap_or("")
            .contains("no such mailbox: nobody"),
        "{:?}",
        row.last_error
    );
    let mut sent = sent.lock().expect("lock").clone();
    sent.sort();
    assert_eq!(
        sent,
        ["d@example.com: Welcome", "ops@example.com: New users"]
    );
}

/// The compiled files the README's and the guide's ```rust blocks are
/// excerpts of.
const SOURCES: [&str; 11] = [
    "tests/it/readme.rs",
    "tests/embedded.rs",
    "examples/app_worker.rs",
    "examples/async_signup.rs",
    "tests/it/async_patterns.rs",
    "examples/traced_signup.rs",
    "examples/video_workflow.rs",
    "examples/ledger.rs",
    "examples/sealed_fields.rs",
    "examples/durable_order.rs",
    "tests/it/results.rs",
];

#[test]
fn every_rust_block_of_the_readme_is_code_the_tests_compile() {
    let readme = read("README.md");
    // The quick start is built whole, as a crate of its own, by
    // tests/it/quickstart.rs; every other block is an excerpt.
    let quickstart = markdown::quickstart(&readme).expect("README.md marks its quick start");
    let quickstart_blocks: Vec<_> = markdown::fenced_blocks(quickstart)
        .into_iter()
        .filter(markdown::Block::is_rust)
        .collect();
    assert!(
        quickstart_blocks.len() >= 2
            && quickstart_blocks
                .iter()
                .all(|block| markdown::file_of(block).is_some()),
        "the quick start's rust blocks are the files tests/it/quickstart.rs builds"
    );
    // The README's other blocks, if any, are excerpts like the guide's.
    check_excerpts("README.md", &markdown::without_quickstart(&readme));
}

#[test]
fn every_rust_block_of_the_guide_is_code_the_tests_compile() {
    let mut checked = 0;
    for page in guide_pages() {
        checked += check_excerpts(&page, &read(&page));
    }
    assert!(checked >= 5, "the guide shows its API in rust blocks");
}

/// Checks that every ```rust block of a page (any `rust,...` info string
/// included) is an excerpt of one of the [`SOURCES`]; returns how many
/// blocks it checked.
fn check_excerpts(page: &str, markdown: &str) -> usize {
    let sources: Vec<(&str, String)> = SOURCES.into_iter().map(|path| (path, read(path))).collect();
    let blocks: Vec<Vec<String>> = markdown::fenced_blocks(markdown)
        .into_iter()
        .filter(markdown::Block::is_rust)
        .map(|block| {
            block
                .lines
                .iter()
                .map(|line| line.trim().to_owned())
                .filter(|line| !line.is_empty())
                .collect()
        })
        .collect();
    for block in &blocks {
        assert!(!block.is_empty(), "{page} has an empty rust block");
        let found = sources
            .iter()
            .any(|(_, source)| contains_lines(source, block));
        assert!(
            found,
            "this {page} block is not an excerpt of {:?}; change both together:\n{}",
            sources.iter().map(|(path, _)| *path).collect::<Vec<_>>(),
            block.join("\n")
        );
    }
    blocks.len()
}

/// The guide's pages: every `.md` file under `docs/src/`.
fn guide_pages() -> Vec<String> {
    let mut pages = Vec::new();
    let mut dirs = vec![std::path::PathBuf::from(format!("{ROOT}/docs/src"))];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display())) {
            let path = entry.expect("directory entry").path();
            if path.is_dir() {
                dirs.push(path);
            } else if path.extension().is_some_and(|ext| ext == "md") {
                let relative = path.strip_prefix(ROOT).expect("under the root");
                pages.push(relative.to_string_lossy().into_owned());
            }
        }
    }
    pages.sort();
    assert!(!pages.is_empty(), "docs/src holds the guide");
    pages
}

const ROOT: &str = env!("CARGO_MANIFEST_DIR");

fn read(path: &str) -> String {
    std::fs::read_to_string(format!("{ROOT}/{path}")).unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// Whether `block`'s lines stand in `source` one after the other (blank
/// lines and indentation aside).
fn contains_lines(source: &str, block: &[String]) -> bool {
    let lines: Vec<&str> = source
        .lines()
        .map(str::trim)
        .filter(|line| !line.is_empty())
        .collect();
    lines
        .windows(block.len())
        .any(|window| window.iter().zip(block).all(|(a, b)| a == b))
}
