//! The command line against input that is valid on its face and wrong
//! underneath: payloads PostgreSQL cannot store, a payload file with no
//! end, an empty database URL, a server that never answers, and text in
//! the database that would drive the operator's terminal.

use std::net::TcpListener;
use std::process::{Command, Stdio};
use std::time::Duration;

use diesel::prelude::*;
use jobqueue_tests::{TestDb, count_where, run_cli};

const CLI: &str = env!("CARGO_BIN_EXE_jobqueue-test-worker");

/// Exit 2 with one line on stderr naming what is wrong, nothing written.
fn refused_as_input(db: &TestDb, args: &[&str], expect: &str) {
    let (code, stdout, stderr) = run_cli(CLI, &db.url, args);
    assert_eq!(code, Some(2), "{args:?}: stdout {stdout} stderr {stderr}");
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(stderr.contains(expect), "{args:?}: {stderr}");
}

#[test]
fn payloads_postgres_cannot_store_are_input_errors() {
    let db = TestDb::new();
    let nul = r#"{"to":"a\u0000b","subject":"x"}"#;
    let huge = r#"{"to":"a","subject":"x","n":1e999999}"#;
    let tiny = r#"{"to":"a","subject":"x","n":1e-999999}"#;
    for (payload, says) in [
        (nul, "U+0000"),
        (huge, "1e999999 is out of the range"),
        (tiny, "out of the range"),
    ] {
        refused_as_input(&db, &["enqueue", "email.send", payload], says);
        refused_as_input(&db, &["enqueue", "other.type", payload, "--force"], says);
    }
    // Nesting far past what a payload needs: refused by the JSON reader.
    let deep = format!(
        r#"{{"to":"a","subject":"x","d":{}{}}}"#,
        "[".repeat(100_000),
        "]".repeat(100_000)
    );
    let file = std::env::temp_dir().join(format!("jq-deep-{}.json", fastrand::u32(..)));
    std::fs::write(&file, deep).expect("write the payload file");
    let path = file.to_str().expect("a UTF-8 path");
    refused_as_input(
        &db,
        &["enqueue", "email.send", "--payload-file", path],
        "1000 levels deep",
    );
    let _ = std::fs::remove_file(&file);
    // A file with no end is read up to a bound, not into memory whole.
    refused_as_input(
        &db,
        &["enqueue", "email.send", "--payload-file", "/dev/zero"],
        "larger than 64 MiB",
    );
    assert_eq!(count_where(&mut db.conn(), "true"), 0, "nothing enqueued");
}

#[test]
fn an_empty_database_url_is_refused_like_a_missing_one() {
    for args in [&["list"][..], &["work"], &["migrate"], &["dashboard"]] {
        for (env, flag) in [(Some(""), None), (None, Some("")), (Some("  "), None)] {
            let mut command = Command::new(CLI);
            command.env_remove("DATABASE_URL");
            if let Some(value) = env {
                command.env("DATABASE_URL", value);
            }
            if let Some(value) = flag {
                command.args(["--database-url", value]);
            }
            let out = command.args(args).output().expect("run the CLI");
            let stderr = String::from_utf8_lossy(&out.stderr);
            assert_eq!(
                out.status.code(),
                Some(2),
                "{args:?} {env:?} {flag:?}: {stderr}"
            );
            assert!(
                stderr.contains("the database URL is empty: set DATABASE_URL"),
                "{args:?}: {stderr}"
            );
        }
    }
}

/// A TCP port that accepts connections and never says a word.
fn silent_server() -> (TcpListener, String) {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = listener.local_addr().expect("address").port();
    let accepting = listener.try_clone().expect("clone the listener");
    std::thread::spawn(move || {
        let mut held = Vec::new();
        for stream in accepting.incoming().flatten() {
            held.push(stream);
        }
    });
    (
        listener,
        format!("postgres://postgres@127.0.0.1:{port}/app"),
    )
}

#[test]
fn a_server_that_never_answers_is_an_error_not_a_hang() {
    let (_listener, url) = silent_server();
    let mut children: Vec<_> = [&["stats"][..], &["migrate"], &["list"], &["dashboard"]]
        .into_iter()
        .map(|args| {
            let child = Command::new(CLI)
                .env_remove("DATABASE_URL")
                .args(["--database-url", &url])
                .args(args)
                .stdout(Stdio::null())
                .stderr(Stdio::piped())
                .spawn()
                .expect("run the CLI");
            (args, child)
        })
        .collect();
    // The default connect timeout is 10 s; a hang is one that outlives
    // several of them.
    let deadline = std::time::Instant::now() + Duration::from_secs(90);
    for (args, child) in &mut children {
        let status = loop {
            if let Some(status) = child.try_wait().expect("wait") {
                break status;
            }
            if std::time::Instant::now() > deadline {
                let _ = child.kill();
                panic!("{args:?} still connecting after 90 s");
            }
            std::thread::sleep(Duration::from_millis(100));
        };
        let mut stderr = String::new();
        std::io::Read::read_to_string(child.stderr.as_mut().expect("stderr"), &mut stderr)
            .expect("read stderr");
        // The database unreachable: exit code 3.
        assert_eq!(status.code(), Some(3), "{args:?}: {stderr}");
        assert!(stderr.contains("timeout"), "{args:?}: {stderr}");
    }
}

#[test]
fn text_from_the_database_cannot_drive_the_terminal() {
    let db = TestDb::new();
    let (code, _, stderr) = run_cli(
        CLI,
        &db.url,
        &["enqueue", "email.send", r#"{"to":"a","subject":"x"}"#],
    );
    assert_eq!(code, Some(0), "{stderr}");
    let mut conn = db.conn();
    // What handlers and other clients can write: an error text and a queue
    // name (the table checks only their lengths).
    diesel::sql_query(
        "UPDATE jobqueue_jobs SET last_error = E'boom\\x1b[2J\\x1b]0;owned\\x07', \
         queue = E'q\\x1b[31m', status = 'failed', finished_at = now()",
    )
    .execute(&mut conn)
    .expect("write hostile text");
    let id: String = {
        #[derive(QueryableByName)]
        struct Id {
            #[diesel(sql_type = diesel::sql_types::Text)]
            id: String,
        }
        diesel::sql_query("SELECT id::text AS id FROM jobqueue_jobs")
            .get_result::<Id>(&mut conn)
            .expect("the job")
            .id
    };
    for args in [
        &["list"][..],
        &["show", &id],
        &["stats"],
        &["queue", "list"],
    ] {
        let (code, stdout, stderr) = run_cli(CLI, &db.url, args);
        assert_eq!(code, Some(0), "{args:?}: {stderr}");
        assert!(
            !stdout.contains('\u{1b}') && !stdout.contains('\u{7}'),
            "{args:?}: {stdout:?}"
        );
        assert!(stdout.contains("q\\u{1b}[31m"), "{args:?}: {stdout}");
    }
    let (_, shown, _) = run_cli(CLI, &db.url, &["show", &id]);
    assert!(
        shown.contains("boom\\u{1b}[2J\\u{1b}]0;owned\\u{7}"),
        "{shown}"
    );
}
