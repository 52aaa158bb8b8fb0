//! The database password is never printed: not by `Debug` of the runner's
//! configuration, not by a runner's log lines at the most verbose level,
//! not by the CLI's error messages.

use std::time::Duration;

use jobqueue_core::Job;
use jobqueue_runner::RunnerConfig;
use jobqueue_tests::fault::{Proc, runner_flags};
use jobqueue_tests::jobs::Noop;
use jobqueue_tests::{TestDb, wait_completed};

const WORKER: &str = env!("CARGO_BIN_EXE_jobqueue-test-worker");

/// What stands for the password in these tests: a server with trust
/// authentication accepts any.
const SECRET: &str = "hunter2-do-not-print";

/// `url` with a password (its own if it has one, else [`SECRET`]), and that
/// password.
fn with_password(url: &str) -> (String, String) {
    let rest = url
        .strip_prefix("postgres://")
        .or_else(|| url.strip_prefix("postgresql://"))
        .expect("a postgres:// URL");
    let scheme = &url[..url.len() - rest.len()];
    let userinfo_end = rest
        .find('@')
        .filter(|at| rest.find('/').is_none_or(|s| *at < s));
    match userinfo_end {
        Some(at) => match rest[..at].split_once(':') {
            Some((_, password)) => (url.to_owned(), password.to_owned()),
            None => (
                format!("{scheme}{}:{SECRET}{}", &rest[..at], &rest[at..]),
                SECRET.to_owned(),
            ),
        },
        None => {
            let joiner = if rest.contains('?') { '&' } else { '?' };
            (format!("{url}{joiner}password={SECRET}"), SECRET.to_owned())
        }
    }
}

#[test]
fn runner_config_debug_hides_the_password() {
    for url in [
        "postgres://app:s3cret-pw@db.internal:5432/app",
        "postgresql://app:s3cret-pw@h1,h2/app?target_session_attrs=read-write",
        "postgres://app@db/app?sslmode=require&password=s3cret-pw",
        "host=db user=app password=s3cret-pw dbname=app",
    ] {
        let shown = format!("{:?}", RunnerConfig::new(url));
        assert!(!shown.contains("s3cret-pw"), "{shown}");
        assert!(shown.contains("***"), "{shown}");
        assert!(
            shown.contains("concurrency"),
            "every other field is shown: {shown}"
        );
        let pretty = format!("{:#?}", RunnerConfig::new(url).concurrency(3));
        assert!(!pretty.contains("s3cret-pw"), "{pretty}");
    }
}

#[test]
fn a_runner_logs_no_password_at_trace_level() {
    let db = TestDb::new();
    let (url, password) = with_password(&db.url);
    let mut conn = db.conn();
    jobqueue_tests::jobs::create_side_tables(&mut conn);
    let id = Noop { n: 1 }.enqueue(&mut conn).expect("enqueue").id();
    let mut command = jobqueue_tests::fault::runner_command(
        WORKER,
        &url,
        "redaction",
        &runner_flags(&[("metrics-addr", "127.0.0.1:0")]),
    );
    command.env("RUST_LOG", "trace");
    let mut runner = Proc::spawn("redaction", command);
    wait_completed(&mut conn, id, Duration::from_secs(30));
    runner.terminate(Duration::from_secs(60));
    let stderr = runner.stderr();
    assert!(stderr.lines().count() > 10, "trace logging is on: {stderr}");
    assert!(
        !stderr.contains(&password),
        "the password is in the runner's log:\n{stderr}"
    );
}

#[test]
fn connection_errors_name_no_password() {
    // Nothing listens on port 1: these commands fail to connect. (`work`
    // keeps trying, logging each failure; its log is checked above.)
    let url = format!("postgres://app:{SECRET}@127.0.0.1:1/app?connect_timeout=2");
    for args in [&["stats"][..], &["migrate"], &["list"]] {
        let output = std::process::Command::new(WORKER)
            .arg("--database-url")
            .arg(&url)
            .args(args)
            .env("RUST_LOG", "trace")
            .output()
            .expect("run the CLI");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_ne!(output.status.code(), Some(0), "{args:?}: {stderr}");
        assert!(!stderr.is_empty(), "{args:?} says why it failed");
        assert!(
            !stderr.contains(SECRET) && !String::from_utf8_lossy(&output.stdout).contains(SECRET),
            "{args:?} printed the password:\n{stderr}"
        );
    }
}
