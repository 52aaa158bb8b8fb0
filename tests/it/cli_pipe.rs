//! The CLI's output read by a reader that goes away early (`jobqueue list |
//! head -1`): every printing command ends quietly, exit code 0 (a failed
//! `doctor` check keeps its 1), nothing on stderr, no panic.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};

use diesel::PgConnection;
use jobqueue_core::engine::{RunnerInfo, declare_schedules, register_runner};
use jobqueue_core::{JobOptions, NewJob, Periodic};
use jobqueue_tests::jobs::Noop;
use jobqueue_tests::{TestDb, run_cli};

/// An application's worker binary: the operational commands.
const CLI: &str = env!("CARGO_BIN_EXE_jobqueue-test-worker");

/// Rows of each kind in the crowded database: enough that every listing's
/// output is several times a pipe's buffer (64 KiB on Linux).
const ROWS: usize = 3000;

/// The least output a listing must have for the test to mean something:
/// the pipe's buffer, the reader's buffer and a margin, so the command is
/// still writing when the reader goes away.
const FAR_MORE_THAN_A_PIPE_HOLDS: usize = 256 * 1024;

/// The database the listings read: [`ROWS`] jobs each in a queue and of a
/// type of its own, [`ROWS`] runners and schedules, and one job with a
/// payload of 300 KB; the id of that job.
fn crowded(conn: &mut PgConnection) -> String {
    let jobs: Vec<NewJob> = (0..ROWS)
        .map(|i| {
            let options = JobOptions::new().queue(format!("queue-{i:05}"));
            NewJob::new(&format!("type.{i:05}"), "{}", options).expect("a valid job")
        })
        .collect();
    jobqueue_core::enqueue_many(conn, &jobs).expect("enqueue");
    let payload = serde_json::json!({ "data": "x".repeat(300_000) }).to_string();
    let big = NewJob::new("big.payload", &payload, JobOptions::new()).expect("a valid job");
    let big = jobqueue_core::enqueue(conn, &big)
        .expect("enqueue")
        .id()
        .to_string();
    for i in 0..ROWS {
        register_runner(
            conn,
            &RunnerInfo {
                worker_id: format!("runner-{i:05}"),
                host: "host".into(),
                pid: 1000 + i as u32,
                version: jobqueue_core::VERSION.into(),
                queues: vec![format!("queue-{i:05}")],
                job_types: vec![format!("type.{i:05}")],
                concurrency: 4,
                lease: std::time::Duration::from_secs(30),
            },
        )
        .expect("register a runner");
    }
    let schedules: Vec<Periodic> = (0..ROWS as u64)
        .map(|n| Periodic::new(format!("schedule-{n:05}"), "0 * * * *", &Noop { n }))
        .collect();
    declare_schedules(conn, &schedules).expect("declare the schedules");
    big
}

/// Runs `args`, reads one line of its output, closes the read end, and
/// returns the exit code and stderr.
fn read_one_line_then_close(url: &str, args: &[&str]) -> (Option<i32>, String) {
    let mut child = Command::new(CLI)
        .arg("--database-url")
        .arg(url)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run the CLI");
    let mut first = String::new();
    BufReader::new(child.stdout.take().expect("stdout"))
        .read_line(&mut first)
        .expect("read the first line");
    // The reader is dropped here: the read end is closed.
    assert!(!first.is_empty(), "{args:?} printed nothing");
    let out = child.wait_with_output().expect("wait for the CLI");
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Runs `args` with a standard output whose read end is closed before the
/// command starts, so its first write meets a closed pipe; the exit code
/// and stderr.
fn closed_from_the_start(url: &str, args: &[&str]) -> (Option<i32>, String) {
    let (reader, writer) = std::io::pipe().expect("a pipe");
    drop(reader);
    let out = Command::new(CLI)
        .arg("--database-url")
        .arg(url)
        .args(args)
        .stdin(Stdio::null())
        .stdout(writer)
        .stderr(Stdio::piped())
        .output()
        .expect("run the CLI");
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn a_reader_that_closes_after_one_line_ends_each_listing_quietly() {
    let (db, mut conn) = TestDb::connected();
    let big = crowded(&mut conn);
    let limit = ROWS.to_string();
    let listings: [&[&str]; 12] = [
        &["list", "--limit", &limit],
        &["list", "--limit", &limit, "--json"],
        &["show", &big],
        &["show", &big, "--json"],
        &["stats"],
        &["stats", "--json"],
        &["queue", "list"],
        &["queue", "list", "--json"],
        &["runners"],
        &["runners", "--json"],
        &["cron", "list"],
        &["cron", "list", "--json"],
    ];
    for args in listings {
        let (code, stdout, stderr) = run_cli(CLI, &db.url, args);
        assert_eq!(code, Some(0), "{args:?}: {stderr}");
        assert!(
            stdout.len() > FAR_MORE_THAN_A_PIPE_HOLDS,
            "{args:?} prints {} bytes: too few to outlast the pipe's buffer",
            stdout.len()
        );
        let (code, stderr) = read_one_line_then_close(&db.url, args);
        assert_eq!(code, Some(0), "{args:?}: {stderr}");
        assert_eq!(stderr, "", "{args:?} says nothing when its reader goes");
    }
}

#[test]
fn a_reader_gone_before_the_first_line_ends_every_printing_command_quietly() {
    let (db, mut conn) = TestDb::connected();
    let url = db.url.as_str();
    let id = |args: &[&str]| {
        let (code, stdout, stderr) = run_cli(CLI, url, args);
        assert_eq!(code, Some(0), "{args:?}: {stderr}");
        stdout.trim().to_owned()
    };
    let waiting = id(&["enqueue", "x.y", "{}", "--force", "--queue", "mail"]);
    let cancelled = id(&["enqueue", "x.y", "{}", "--force"]);
    id(&["cancel", &cancelled]);
    let deleted = id(&["enqueue", "x.y", "{}", "--force"]);
    id(&["cancel", &deleted]);
    declare_schedules(
        &mut conn,
        &[Periodic::new("hourly", "0 * * * *", &Noop { n: 1 })],
    )
    .expect("declare a schedule");

    let commands: Vec<Vec<&str>> = vec![
        vec!["migrate"],
        vec!["enqueue", "x.y", "{}", "--force"],
        vec!["list"],
        vec!["list", "--json"],
        vec!["show", &waiting],
        vec!["show", &waiting, "--json"],
        vec!["stats"],
        vec!["stats", "--json"],
        vec!["retry", &cancelled],
        vec!["retry", "--failed"],
        vec!["cancel", &cancelled],
        vec!["delete", &deleted],
        vec!["prune"],
        vec!["queue", "pause", "mail"],
        vec!["queue", "resume", "mail"],
        vec!["queue", "limit", "mail", "5"],
        vec!["queue", "list"],
        vec!["queue", "list", "--json"],
        vec!["runners"],
        vec!["runners", "--json"],
        vec!["cron", "pause", "hourly"],
        vec!["cron", "resume", "hourly"],
        vec!["cron", "run", "hourly"],
        vec!["cron", "list"],
        vec!["cron", "list", "--json"],
        vec!["--version"],
        vec!["help"],
        vec!["completions", "bash"],
        vec!["completions", "zsh"],
        vec!["man"],
    ];
    for args in &commands {
        let (code, stderr) = closed_from_the_start(url, args);
        assert_eq!(code, Some(0), "{args:?}: {stderr}");
        assert_eq!(stderr, "", "{args:?} says nothing when its reader is gone");
    }
    // The commands did their work; only what they said was lost.
    let cancelled: jobqueue_core::JobId = cancelled.parse().expect("an id");
    assert_eq!(
        jobqueue_tests::read_job(&mut conn, cancelled).status,
        jobqueue_core::JobStatus::Cancelled,
        "retried, then cancelled again"
    );
    assert_eq!(
        jobqueue_tests::scalar(
            &mut conn,
            "SELECT count(*) AS n FROM jobqueue_jobs WHERE job_type = 'x.y'"
        ),
        3,
        "the two left of the setup's three, and the one enqueued with its reader gone"
    );

    // `doctor` keeps the exit code of its checks: a due job no live runner
    // works fails two of them.
    for args in [&["doctor"][..], &["doctor", "--json"]] {
        let (code, _, stderr) = run_cli(CLI, url, args);
        assert_eq!(code, Some(1), "{args:?}: {stderr}");
        let (closed_code, closed_stderr) = closed_from_the_start(url, args);
        assert_eq!(closed_code, code, "{args:?}: {closed_stderr}");
        assert_eq!(closed_stderr, stderr, "{args:?}: only the failed checks");
        assert!(!closed_stderr.contains("panicked"), "{closed_stderr}");
    }
}
