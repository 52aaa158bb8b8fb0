//! Every `jobqueue` subcommand on a real database, and its error for bad input.

use std::process::{Command, Output};

use diesel::prelude::*;
use jobqueue_core::{Claim, Failure, JobStatus, claim, fail, get_job};
use jobqueue_tests::{TestDb, count_where};

/// An application's worker binary: the operational commands.
const CLI: &str = env!("CARGO_BIN_EXE_jobqueue-test-worker");
/// The `jobqueue` binary's build: the operational commands, `demo`, `bench`.
const TOOLS: &str = env!("CARGO_BIN_EXE_jobqueue-test-tools");

/// The binary with `args`' command: the tools for `demo` and `bench`.
fn binary(args: &[&str]) -> &'static str {
    if matches!(args.first(), Some(&"demo" | &"bench")) {
        TOOLS
    } else {
        CLI
    }
}

struct Run {
    code: Option<i32>,
    stdout: String,
    stderr: String,
}

fn cli(db: &TestDb, args: &[&str]) -> Run {
    let Output {
        status,
        stdout,
        stderr,
    } = Command::new(binary(args))
        .arg("--database-url")
        .arg(&db.url)
        .args(args)
        .output()
        .expect("run the CLI");
    Run {
        code: status.code(),
        stdout: String::from_utf8_lossy(&stdout).into_owned(),
        stderr: String::from_utf8_lossy(&stderr).into_owned(),
    }
}

fn ok(db: &TestDb, args: &[&str]) -> String {
    let run = cli(db, args);
    assert_eq!(run.code, Some(0), "{args:?} failed: {}", run.stderr);
    run.stdout
}

/// Fails with exit code 1 and one clear line on stderr containing `expect`.
fn fails(db: &TestDb, args: &[&str], expect: &str) {
    let run = cli(db, args);
    assert_eq!(
        run.code,
        Some(1),
        "{args:?} should fail; stdout: {} stderr: {}",
        run.stdout,
        run.stderr
    );
    let lines: Vec<&str> = run.stderr.lines().collect();
    assert_eq!(lines.len(), 1, "one line on stderr, got: {}", run.stderr);
    assert!(
        lines[0].starts_with("jobqueue: error: ") && lines[0].contains(expect),
        "{args:?}: {}",
        lines[0]
    );
}

#[test]
fn migrate_applies_the_schema_once() {
    let db = TestDb::new();
    let mut conn = db.conn();
    diesel::sql_query("DELETE FROM __diesel_schema_migrations")
        .execute(&mut conn)
        .expect("reset");
    diesel::sql_query("DROP TABLE IF EXISTS jobqueue_jobs")
        .execute(&mut conn)
        .expect("drop");
    fails(&db, &["work"], "run `jobqueue migrate` first");
    assert!(ok(&db, &["migrate"]).contains(&format!(
        "applied {} migration(s)",
        jobqueue_tests::migration_count()
    )));
    assert!(ok(&db, &["migrate"]).contains("up to date"));
}

#[test]
fn enqueue_list_show_stats() {
    let db = TestDb::new();
    let id = ok(
        &db,
        &[
            "enqueue",
            "email.send",
            r#"{"to":"a@example.com"}"#,
            "--priority",
            "300",
            "--queue",
            "mail",
            "--max-attempts",
            "4",
        ],
    );
    let id = id.trim();
    let mut conn = db.conn();
    let row = get_job(&mut conn, id.parse().expect("an id"))
        .expect("read")
        .expect("row");
    assert_eq!(
        (row.priority, row.queue.as_str(), row.max_attempts),
        (300, "mail", 4)
    );
    assert_eq!(row.payload["to"], "a@example.com");
    ok(
        &db,
        &[
            "enqueue",
            "report.build",
            "{}",
            "--delay-secs",
            "60",
            "--unique-key",
            "r1",
        ],
    );
    ok(
        &db,
        &[
            "enqueue",
            "report.build",
            "{}",
            "--run-at",
            "2030-01-01T00:00:00Z",
        ],
    );

    let listed = ok(&db, &["list"]);
    assert!(
        listed.contains(id) && listed.contains("email.send") && listed.contains("report.build"),
        "{listed}"
    );
    let mail_only = ok(&db, &["list", "--queue", "mail", "--status", "pending"]);
    assert!(
        mail_only.contains(id) && !mail_only.contains("report.build"),
        "{mail_only}"
    );

    let shown = ok(&db, &["show", id]);
    assert!(
        shown.contains("email.send") && shown.contains("a@example.com") && shown.contains("0 of 4"),
        "{shown}"
    );

    let stats = ok(&db, &["stats"]);
    assert!(
        stats.contains("mail") && stats.contains("default") && stats.contains("email.send"),
        "{stats}"
    );
}

#[test]
fn bad_input_is_one_clear_line_and_exit_1() {
    let db = TestDb::new();
    fails(
        &db,
        &["enqueue", "email.send", "{not json"],
        "invalid payload: not valid JSON",
    );
    fails(
        &db,
        &["enqueue", "email.send", "{}", "--queue", "bad queue;"],
        "invalid queue",
    );
    fails(
        &db,
        &["enqueue", "email.send", "{}", "--priority", "5000"],
        "invalid priority",
    );
    fails(&db, &["enqueue", "bad type", "{}"], "invalid job type");
    fails(
        &db,
        &["enqueue", "a", "{}", "--run-at", "tomorrow"],
        "--run-at `tomorrow` is not an RFC 3339 time",
    );
    fails(
        &db,
        &["show", "0195f1a4-0000-7000-8000-000000000000"],
        "no job with id",
    );
    fails(&db, &["show", "not-an-id"], "is not a UUID");
    fails(
        &db,
        &["cancel", "0195f1a4-0000-7000-8000-000000000000"],
        "no job with id",
    );
    fails(
        &db,
        &["retry", "0195f1a4-0000-7000-8000-000000000000"],
        "no job with id",
    );
    fails(&db, &["list", "--status", "done"], "is not a status");
    fails(&db, &["list", "--queue", "x y"], "invalid queue");
    fails(
        &db,
        &["work", "--concurrency", "0"],
        "concurrency 0 is out of range",
    );
    fails(&db, &["work", "--queues", "ok,no'pe"], "invalid queue");
    // Usage errors are clap's: exit 2 with a usage message.
    let run = cli(&db, &["enqueue"]);
    assert_eq!(run.code, Some(2));
    assert!(run.stderr.contains("Usage"), "{}", run.stderr);
    assert_eq!(cli(&db, &["frobnicate"]).code, Some(2));
}

#[test]
fn cancel_retry_prune() {
    let db = TestDb::new();
    let mut conn = db.conn();
    let pending = ok(&db, &["enqueue", "x.y", "{}"]).trim().to_owned();
    assert!(ok(&db, &["cancel", &pending]).contains("cancelled"));
    fails(&db, &["cancel", &pending], "already finished: cancelled");

    // A dead-lettered job, retried by id, and again with --failed.
    let failing = ok(&db, &["enqueue", "x.y", "{}", "--max-attempts", "1"])
        .trim()
        .to_owned();
    let lease = claim(&mut conn, &Claim::new("w")).expect("claim")[0].lease();
    fail(&mut conn, &Failure::permanent(lease, "boom")).expect("fail");
    assert!(ok(&db, &["retry", &failing]).contains("requeued"));
    let row = get_job(&mut conn, failing.parse().expect("id"))
        .expect("read")
        .expect("row");
    assert_eq!((row.status, row.attempts), (JobStatus::Pending, 0));
    assert_eq!(row.last_error.as_deref(), Some("boom"), "history kept");
    let lease = claim(&mut conn, &Claim::new("w")).expect("claim")[0].lease();
    fail(&mut conn, &Failure::permanent(lease, "boom again")).expect("fail");
    assert!(ok(&db, &["retry", "--failed"]).contains("requeued 1 failed job"));
    fails(
        &db,
        &["retry", &failing],
        "only failed or cancelled jobs can be retried",
    );
    assert_eq!(
        cli(&db, &["retry"]).code,
        Some(2),
        "retry needs an id or --failed"
    );

    // Prune: an old completed job goes, a fresh one stays.
    let lease = claim(&mut conn, &Claim::new("w")).expect("claim")[0].lease();
    jobqueue_core::complete(&mut conn, &lease).expect("complete");
    diesel::sql_query("UPDATE jobqueue_jobs SET finished_at = now() - interval '3 days' WHERE status = 'completed'")
        .execute(&mut conn)
        .expect("age");
    assert!(ok(&db, &["prune"]).contains("pruned 1 completed"));
    assert_eq!(count_where(&mut conn, "status = 'completed'"), 0);
    assert_eq!(
        count_where(&mut conn, "status = 'cancelled'"),
        1,
        "fresh cancelled job kept"
    );
}

#[test]
fn every_subcommand_has_help() {
    let db = TestDb::new();
    for sub in [
        "migrate", "work", "enqueue", "list", "show", "stats", "retry", "cancel", "prune", "demo",
        "bench",
    ] {
        let help = ok(&db, &[sub, "--help"]);
        assert!(help.contains("Usage"), "{sub} --help: {help}");
    }
    assert!(ok(&db, &["--help"]).contains("Commands"));
}

#[test]
fn an_application_worker_binary_has_no_demo_or_bench() {
    for tool in ["demo", "bench"] {
        let out = Command::new(CLI)
            .args([tool, "--help"])
            .output()
            .expect("run the CLI");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{tool}: {stderr}");
        assert!(stderr.contains("unrecognized subcommand"), "{stderr}");
    }
    let help = Command::new(CLI)
        .arg("--help")
        .output()
        .expect("run the CLI");
    let help = String::from_utf8_lossy(&help.stdout);
    assert!(
        help.contains("migrate") && !help.contains("demo") && !help.contains("bench"),
        "{help}"
    );
}

#[test]
fn demo_runs_a_small_mix() {
    let db = TestDb::new();
    let name = format!("jq_demo_{}", fastrand::u32(..));
    let out = ok(
        &db,
        &[
            "demo",
            "--jobs",
            "300",
            "--concurrency",
            "8",
            "--database",
            &name,
        ],
    );
    assert!(
        out.contains("finished 300 jobs") && out.contains("pickup latency"),
        "{out}"
    );
    assert!(out.contains("long report job: completed at 100%"), "{out}");
    // A second run recreates the demo's own database.
    ok(
        &db,
        &[
            "demo",
            "--jobs",
            "20",
            "--concurrency",
            "2",
            "--database",
            &name,
        ],
    );
    let mut admin = db.conn();
    diesel::sql_query(format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)"))
        .execute(&mut admin)
        .expect("drop demo database");
}

#[test]
fn operational_commands_need_a_database_and_never_start_one() {
    for args in [&["work"][..], &["stats"], &["migrate"], &["list"]] {
        let out = Command::new(CLI)
            .env_remove("DATABASE_URL")
            .args(args)
            .output()
            .expect("run the CLI");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{args:?}: {stderr}");
        assert_eq!(
            stderr.trim(),
            "jobqueue: error: no database given: set DATABASE_URL or pass --database-url",
            "{args:?}"
        );
    }
}

#[test]
fn demo_and_bench_never_drop_a_database_they_did_not_create() {
    let db = TestDb::new();
    let own = db.url.rsplit('/').next().expect("db name").to_owned();
    // An application's database, jobs table and all: empty of jobs, and
    // also holding one.
    for jobs in [0, 1] {
        if jobs == 1 {
            ok(&db, &["enqueue", "x.y", "{}"]);
        }
        for args in [
            ["demo", "--jobs", "10", "--database", own.as_str()],
            ["bench", "--quick", "--force", "--database", own.as_str()],
        ] {
            fails(&db, &args, "was not created by jobqueue");
        }
    }
    let mut conn = db.conn();
    assert_eq!(
        jobqueue_tests::count_where(&mut conn, "true"),
        1,
        "the database and its job are still there"
    );
}

#[test]
fn bench_runs_every_measurement() {
    let db = TestDb::new();
    fails(
        &db,
        &["bench", "--only", "nonsense"],
        "unknown measurement `nonsense`",
    );

    let name = format!("jq_bench_{}", fastrand::u32(..));
    let out = ok(
        &db,
        &[
            "bench",
            "--quick",
            "--runs",
            "1",
            "--steady-secs",
            "1",
            "--database",
            &name,
        ],
    );
    for row in [
        "bulk enqueue",
        "transactional enqueue / commit ceiling",
        "burn-down, 8 workers",
        "bare-SQL floor",
        "runner best burn-down / bare-SQL floor",
        "pickup latency p95",
        "claim cost with history / empty",
        "drain from truncated table, 8 workers, 5000 jobs: worst / median",
        "drain from truncated table, 8 workers, 5000 jobs: WAL per job",
        "due jobs in another queue / alone",
        "q1 jobs scheduled tomorrow, higher priority / alone",
        "max due backlog",
        "idle runner CPU",
        "peak RSS",
    ] {
        assert!(out.contains(row), "no `{row}` row in:\n{out}");
    }
    let mut admin = db.conn();
    #[derive(QueryableByName)]
    struct N {
        #[diesel(sql_type = diesel::sql_types::BigInt)]
        n: i64,
    }
    let left = diesel::sql_query(format!(
        "SELECT count(*) AS n FROM pg_database WHERE datname = '{name}'"
    ))
    .get_result::<N>(&mut admin)
    .expect("query")
    .n;
    assert_eq!(left, 0, "the bench drops its database");
}
