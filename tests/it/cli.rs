//! Every `jobqueue` subcommand on a real database, and its error for bad input.

use std::process::{Command, Output};

use diesel::prelude::*;
use jobqueue_core::engine::{Claim, Failure, claim, fail};
use jobqueue_core::{JobStatus, get_job};
use jobqueue_tests::{TestDb, assert_contains, count_where, settings};

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
    fails_with(db, args, 1, expect);
}

/// Refused as a wrong command line: exit code 2 and one clear line on
/// stderr containing `expect`.
fn refused(db: &TestDb, args: &[&str], expect: &str) {
    fails_with(db, args, 2, expect);
}

fn fails_with(db: &TestDb, args: &[&str], code: i32, expect: &str) {
    let run = cli(db, args);
    assert_eq!(
        run.code,
        Some(code),
        "{args:?} should fail with {code}; stdout: {} stderr: {}",
        run.stdout,
        run.stderr
    );
    let lines: Vec<&str> = run.stderr.lines().collect();
    assert_eq!(lines.len(), 1, "one line on stderr, got: {}", run.stderr);
    // Under the binary's own name.
    let name = std::path::Path::new(binary(args))
        .file_name()
        .expect("a file name")
        .to_string_lossy();
    assert!(
        lines[0].starts_with(&format!("{name}: error: ")) && lines[0].contains(expect),
        "{args:?}: {}",
        lines[0]
    );
}

/// Enqueues a job of a type the binary does not register (`--force`);
/// returns its id.
fn enqueue_unregistered(db: &TestDb) -> String {
    ok(db, &["enqueue", "x.y", "{}", "--force"])
        .trim()
        .to_owned()
}

#[test]
fn migrate_applies_the_schema_once() {
    let (db, mut conn) = TestDb::connected();
    diesel::sql_query("DELETE FROM jobqueue_schema_migrations")
        .execute(&mut conn)
        .expect("reset");
    diesel::sql_query(
        "DROP TABLE IF EXISTS jobqueue_jobs, jobqueue_queues, jobqueue_schedules, jobqueue_runners, \
         jobqueue_completions, jobqueue_workflows, jobqueue_workflow_steps, \
         jobqueue_workflow_edges, jobqueue_results",
    )
    .execute(&mut conn)
    .expect("drop");
    fails(&db, &["work"], "run `jobqueue migrate`");
    assert!(ok(&db, &["migrate"]).contains(&format!(
        "applied {} migration(s)",
        jobqueue_tests::migration_count()
    )));
    assert!(ok(&db, &["migrate"]).contains("up to date"));
}

#[test]
fn enqueue_list_show_stats() {
    let (db, mut conn) = TestDb::connected();
    let row_of = |conn: &mut PgConnection, id: &str| {
        get_job(conn, id.trim().parse().expect("an id"))
            .expect("read")
            .found()
            .expect("row")
    };
    // What the type declares applies: queue mail, priority 150, 5 attempts.
    let declared = ok(
        &db,
        &[
            "enqueue",
            "email.send",
            r#"{"to":"a@example.com","subject":"Hi"}"#,
        ],
    );
    let row = row_of(&mut conn, &declared);
    assert_eq!(settings(&row), ("email.send", 150, "mail", 5));
    // Flags override it.
    let id = ok(
        &db,
        &[
            "enqueue",
            "email.send",
            r#"{"to":"b@example.com","subject":"Hi"}"#,
            "--priority",
            "300",
            "--queue",
            "urgent-mail",
            "--max-attempts",
            "4",
        ],
    );
    let id = id.trim();
    let row = row_of(&mut conn, id);
    assert_eq!(settings(&row), ("email.send", 300, "urgent-mail", 4));
    assert_eq!(row.payload["to"], "b@example.com");
    // A type this binary does not register, forced: queue-wide defaults.
    let forced = ok(
        &db,
        &[
            "enqueue",
            "report.build",
            "{}",
            "--force",
            "--delay-secs",
            "60",
            "--unique-key",
            "r1",
        ],
    );
    // The same key again while that job waits: nothing inserted, the
    // holder's id printed, a note on stderr, success.
    let again = cli(
        &db,
        &[
            "enqueue",
            "report.build",
            "{}",
            "--force",
            "--unique-key",
            "r1",
        ],
    );
    assert_eq!(again.code, Some(0), "{}", again.stderr);
    assert_eq!(again.stdout, forced, "the holder's id");
    assert_contains(&again.stderr, &["not enqueued", "`r1`"]);
    assert_eq!(count_where(&mut conn, "unique_key = 'r1'"), 1);
    let row = row_of(&mut conn, &forced);
    assert_eq!(settings(&row), ("report.build", 100, "default", 3));
    assert_eq!(row.status, JobStatus::Scheduled);
    ok(
        &db,
        &[
            "enqueue",
            "report.build",
            "{}",
            "--force",
            "--run-at",
            "2030-01-01T01:00:00+01:00",
        ],
    );
    assert_eq!(
        count_where(&mut conn, "run_at = '2030-01-01T00:00:00Z'"),
        1,
        "the zone is honoured"
    );

    let listed = ok(&db, &["list"]);
    assert_contains(&listed, &[id, "email.send", "report.build"]);
    let mail_only = ok(&db, &["list", "--queue", "mail", "--status", "pending"]);
    assert!(
        mail_only.contains(declared.trim()) && !mail_only.contains("report.build"),
        "{mail_only}"
    );

    let shown = ok(&db, &["show", id]);
    assert_contains(&shown, &["email.send", "b@example.com", "0 of 4"]);

    let stats = ok(&db, &["stats"]);
    assert_contains(
        &stats,
        &[
            "mail",
            "default",
            "email.send",
            "completed: 0 in the last hour, 0 in the last day",
        ],
    );

    // A completed job: its row is gone (the default), and `stats` counts
    // it; `show` says why it finds nothing.
    let lease = jobqueue_tests::claim_one(&mut conn, "w");
    jobqueue_core::engine::complete_and_delete(&mut conn, &lease).expect("complete");
    let stats = ok(&db, &["stats"]);
    assert_contains(
        &stats,
        &["completed: 1 in the last hour, 1 in the last day"],
    );
    fails(
        &db,
        &["show", &lease.job_id.to_string()],
        "completed jobs are deleted as they complete",
    );
}

/// `list` reads page after page (a page holds 500 jobs) until it has as
/// many as asked, newest first, and refuses a limit past 10,000.
#[test]
fn list_pages_through_to_its_limit_newest_first() {
    let (db, mut conn) = TestDb::connected();
    let done =
        jobqueue_core::enqueue_many(&mut conn, &jobqueue_tests::bare_jobs(1200)).expect("enqueue");
    // Ids sort as the database sorts uuids: byte by byte.
    let mut newest_first: Vec<String> = done.inserted.iter().map(ToString::to_string).collect();
    newest_first.sort_unstable_by(|a, b| b.cmp(a));
    let listed = ok(&db, &["list", "--limit", "1100"]);
    let shown: Vec<&str> = listed
        .lines()
        .skip(1)
        .filter_map(|line| line.split_whitespace().next())
        .collect();
    assert_eq!(shown, newest_first[..1100]);
    refused(
        &db,
        &["list", "--limit", "10001"],
        "out of range (1 to 10000)",
    );
    refused(&db, &["list", "--limit", "0"], "out of range");
}

#[test]
fn enqueue_reads_large_payloads_from_a_file_or_stdin() {
    let (db, mut conn) = TestDb::connected();
    // Over the OS's limit for one argument (128 KiB on Linux).
    let subject = "x".repeat(300_000);
    let payload = format!(r#"{{"to":"a@example.com","subject":"{subject}"}}"#);
    let file = std::env::temp_dir().join(format!("jq-payload-{}.json", fastrand::u32(..)));
    std::fs::write(&file, &payload).expect("write the payload file");
    let from_file = ok(
        &db,
        &[
            "enqueue",
            "email.send",
            "--payload-file",
            file.to_str().expect("a UTF-8 path"),
        ],
    );
    let _ = std::fs::remove_file(&file);

    let mut child = Command::new(CLI)
        .args([
            "--database-url",
            &db.url,
            "enqueue",
            "email.send",
            "--payload-file",
            "-",
        ])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("run the CLI");
    {
        use std::io::Write;
        let mut stdin = child.stdin.take().expect("stdin");
        stdin.write_all(payload.as_bytes()).expect("write stdin");
    }
    let out = child.wait_with_output().expect("wait");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let from_stdin = String::from_utf8_lossy(&out.stdout).into_owned();
    for id in [from_file, from_stdin] {
        let row = get_job(&mut conn, id.trim().parse().expect("an id"))
            .expect("read")
            .found()
            .expect("row");
        assert_eq!(row.payload["subject"].as_str().map(str::len), Some(300_000));
        assert_eq!(row.queue, "mail");
    }
    refused(
        &db,
        &[
            "enqueue",
            "email.send",
            "--payload-file",
            "/no/such/file.json",
        ],
        "--payload-file /no/such/file.json: cannot read the payload",
    );
    let both = cli(&db, &["enqueue", "email.send", "{}", "--payload-file", "-"]);
    assert_eq!(both.code, Some(2));
    assert_contains(&both.stderr, &["cannot be used with"]);
}

#[test]
fn bad_input_is_one_clear_line_and_the_right_exit_code() {
    let db = TestDb::new();
    // The command line is wrong: exit 2, nothing written.
    let mail = r#"{"to":"a@example.com","subject":"Hi"}"#;
    let wrong: [(&[&str], &str); 19] = [
        (
            &["enqueue", "email.send", "{not json"],
            "invalid payload: not valid JSON",
        ),
        (
            &["enqueue", "email.send", r#"{"to":"a@example.com"}"#],
            "cannot deserialize the payload of job type `email.send`: missing field `subject`",
        ),
        (
            &["enqueue", "emial.send", "{}"],
            "`emial.send` is not a job type this binary registers (it registers bench.chaos, email.send, test.",
        ),
        (
            &["enqueue", "emial.send", "{not json", "--force"],
            "invalid payload: not valid JSON",
        ),
        (
            &["enqueue", "email.send", mail, "--queue", "bad queue;"],
            "invalid queue",
        ),
        (
            &["enqueue", "email.send", mail, "--priority", "5000"],
            "invalid priority",
        ),
        (
            &["enqueue", "email.send", mail, "--max-attempts", "-1"],
            "invalid max_attempts: -1 is out of range",
        ),
        (
            &["enqueue", "email.send", mail, "--delay-secs", "-5"],
            "--delay-secs must be a non-negative number of seconds",
        ),
        (
            &["enqueue", "bad type", "{}", "--force"],
            "invalid job type",
        ),
        (
            &["enqueue", "email.send", mail, "--run-at", "tomorrow"],
            "--run-at `tomorrow` is not an RFC 3339 time",
        ),
        (
            &[
                "enqueue",
                "email.send",
                mail,
                "--run-at",
                "2026-11-23T10:00:00",
            ],
            "--run-at `2026-11-23T10:00:00` has no time zone: add one, e.g. 2026-11-23T10:00:00Z",
        ),
        (&["show", "not-an-id"], "is not a UUID"),
        // An id jobqueue never issued: not a UUIDv7.
        (
            &["show", "00000000-0000-0000-0000-000000000000"],
            "jobqueue never issued it: job ids are UUIDv7",
        ),
        (&["list", "--status", "done"], "is not a status"),
        (&["list", "--queue", "x y"], "invalid queue"),
        (
            &["work", "--concurrency", "0"],
            "concurrency 0 is out of range",
        ),
        (
            &["work", "--concurrency", "4", "--threads", "5"],
            "threads 5 is out of range (1 to concurrency, 4)",
        ),
        (
            &["work", "--async-threads", "0"],
            "async_threads 0 is out of range",
        ),
        (&["work", "--queues", "ok,no'pe"], "invalid queue"),
    ];
    for (args, expect) in wrong {
        refused(&db, args, expect);
    }
    let mut conn = db.conn();
    assert_eq!(count_where(&mut conn, "true"), 0, "nothing was enqueued");

    // Exit 1: the command line parses, but the database's state is not
    // what it needs (no such job), or the bench cannot do what it asks.
    let no_job = "0195f1a4-0000-7000-8000-000000000000";
    let failing: [(&[&str], &str); 5] = [
        (&["show", no_job], "no job with id"),
        (&["cancel", no_job], "no job with id"),
        (&["retry", no_job], "no job with id"),
        (
            &["bench", "--only", "nonsense"],
            "unknown measurement `nonsense`",
        ),
        (
            &["bench", "--own-cluster", "--quick"],
            "give it without --database-url",
        ),
    ];
    for (args, expect) in failing {
        fails(&db, args, expect);
    }
    // clap's own usage errors: exit 2 with a usage message.
    let run = cli(&db, &["enqueue"]);
    assert_eq!(run.code, Some(2));
    assert!(run.stderr.contains("Usage"), "{}", run.stderr);
    assert_eq!(cli(&db, &["frobnicate"]).code, Some(2));
}

#[test]
fn cancel_retry_prune() {
    let (db, mut conn) = TestDb::connected();
    let pending = enqueue_unregistered(&db);
    assert!(ok(&db, &["cancel", &pending]).contains("cancelled"));
    // Cancelling again is not an error, and changes nothing.
    assert!(ok(&db, &["cancel", &pending]).contains("was already cancelled"));

    // A dead-lettered job, retried by id, and again with --failed.
    let failing = ok(
        &db,
        &["enqueue", "x.y", "{}", "--max-attempts", "1", "--force"],
    )
    .trim()
    .to_owned();
    let lease = claim(&mut conn, &Claim::new("w")).expect("claim")[0].lease();
    fail(&mut conn, &Failure::permanent(lease, "boom")).expect("fail");
    assert!(ok(&db, &["retry", &failing]).contains("requeued"));
    let row = get_job(&mut conn, failing.parse().expect("id"))
        .expect("read")
        .found()
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
    jobqueue_core::engine::complete(&mut conn, &lease).expect("complete");
    fails(
        &db,
        &["cancel", &failing],
        "already finished: completed; only waiting or running jobs can be cancelled",
    );
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

    // Delete: a finished job goes; a live one is refused and stays.
    assert!(ok(&db, &["delete", &pending]).contains("deleted"));
    assert_eq!(count_where(&mut conn, &format!("id = '{pending}'")), 0);
    let live = enqueue_unregistered(&db);
    fails(&db, &["delete", &live], "only finished jobs can be deleted");
    assert_eq!(count_where(&mut conn, &format!("id = '{live}'")), 1);
}

#[test]
fn every_subcommand_has_help() {
    let db = TestDb::new();
    for sub in [
        "migrate",
        "work",
        "enqueue",
        "list",
        "show",
        "stats",
        "retry",
        "cancel",
        "delete",
        "prune",
        "queue",
        "cron",
        "runners",
        "doctor",
        "demo",
        "bench",
        "completions",
        "man",
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

/// Runs `demo` with `jobs` jobs and `concurrency` workers in database
/// `name`, on the server of `db`; returns what it printed.
fn demo(db: &TestDb, name: &str, jobs: &str, concurrency: &str) -> String {
    ok(
        db,
        &[
            "demo",
            "--jobs",
            jobs,
            "--concurrency",
            concurrency,
            "--database",
            name,
        ],
    )
}

#[test]
fn demo_runs_a_small_mix() {
    let db = TestDb::new();
    let name = format!("jq_demo_{}", fastrand::u32(..));
    let out = demo(&db, &name, "300", "8");
    assert_contains(&out, &["finished 300 jobs", "pickup latency"]);
    assert!(out.contains("long report job: completed at 100%"), "{out}");
    // A second run recreates the demo's own database.
    demo(&db, &name, "20", "2");
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
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert_eq!(
            stderr.trim(),
            "jobqueue-test-worker: error: no database given: set DATABASE_URL or pass --database-url",
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
            enqueue_unregistered(&db);
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
        "bare-SQL queue of an application's own",
        "burn-down, 8 workers / bare-SQL queue",
        "burn-down with middleware / without",
        "bare-SQL floor",
        "runner best burn-down / bare-SQL floor",
        "pickup latency p95",
        "pickup latency p95 from enqueue start",
        "claim cost with history / empty",
        "drain from truncated table, 8 workers, 5000 jobs: worst / median",
        "drain from truncated table, 8 workers, 5000 jobs: WAL per job",
        "due jobs in another queue / alone",
        "q1 jobs scheduled tomorrow, higher priority / alone",
        "max due backlog",
        "idle runner CPU",
        "peak RSS",
        "queue b pickup p95 while 3000 drain in queue a",
        "pickup floor p95 while 3000 drain in queue a",
        "queue b pickup p95 / pickup floor p95, draining a",
        "burn-down, key limit not binding / no keys",
        "burn-down, key limit not binding / the same keyed jobs unlimited",
        "enqueue of those keyed jobs, limit 10 / no limit",
        "burn-down, key limit 1 / no keys",
        "burn-down of 1 ms jobs, key limit not binding / no keys",
        "claim 100 of every queue, 10000 waiting / none",
        "burn-down time, fan-out and fan-in / plain",
        "transactions per job, fan-out and fan-in",
        "list page by tag, rare and oldest / no filter",
        "a durable step / a plain job",
        "a durable cursor advance / a plain job",
        "burn-down async handlers / thread handlers",
        "awaiting jobs async / thread handlers",
        "result wait p95 / pickup latency p95",
        "WAL per job, result kept / none",
    ] {
        assert!(out.contains(row), "no `{row}` row in:\n{out}");
    }
    let left = jobqueue_tests::scalar(
        &mut db.conn(),
        &format!("SELECT count(*) AS n FROM pg_database WHERE datname = '{name}'"),
    );
    assert_eq!(left, 0, "the bench drops its database");
}

#[test]
fn a_bench_whose_reader_goes_away_still_ends_well_and_drops_its_database() {
    use std::io::BufRead;
    let db = TestDb::new();
    let name = format!("jq_bench_{}", fastrand::u32(..));
    let mut bench = Command::new(TOOLS)
        .args(["--database-url", &db.url])
        .args([
            "bench",
            "--quick",
            "--runs",
            "1",
            "--only",
            "bulk,burn",
            "--database",
            &name,
        ])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("start the bench");
    // As `jobqueue bench | head -1`: one line read, then the pipe closed.
    let mut first = String::new();
    std::io::BufReader::new(bench.stdout.take().expect("its stdout"))
        .read_line(&mut first)
        .expect("read a line");
    assert!(first.starts_with("jobqueue bench:"), "{first}");
    let out = bench.wait_with_output().expect("wait for the bench");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{:?}: {stderr}", out.status);
    assert!(!stderr.contains("panicked"), "{stderr}");
    let left = jobqueue_tests::scalar(
        &mut db.conn(),
        &format!("SELECT count(*) AS n FROM pg_database WHERE datname = '{name}'"),
    );
    assert_eq!(left, 0, "the bench drops its database");
}

#[test]
fn bench_runs_on_a_throwaway_cluster_of_its_own() {
    let Output {
        status,
        stdout,
        stderr,
    } = Command::new(TOOLS)
        .args([
            "bench",
            "--own-cluster",
            "--quick",
            "--runs",
            "1",
            "--only",
            "fair,plan",
        ])
        .env_remove("DATABASE_URL")
        .output()
        .expect("run the bench");
    let (stdout, stderr) = (
        String::from_utf8_lossy(&stdout),
        String::from_utf8_lossy(&stderr),
    );
    assert!(status.success(), "{stderr}");
    // PostgreSQL's defaults, not the shared server's settings.
    assert!(stdout.contains("autovacuum=on"), "{stdout}");
    assert!(stdout.contains("pickup floor p95"), "{stdout}");
    // pg_stat_statements loaded on it: the claims' planning counted.
    assert!(stdout.contains("planning per call"), "{stdout}");
    assert!(stdout.contains("plans per call"), "{stdout}");
    let port = stderr
        .split("127.0.0.1:")
        .nth(1)
        .and_then(|rest| rest.split('/').next())
        .expect("the bench names its cluster's address");
    let prefix = format!("jobqueue-bench-{port}-");
    let left: Vec<_> = std::fs::read_dir(std::env::temp_dir())
        .expect("read the temp directory")
        .filter_map(|entry| entry.ok())
        .filter(|entry| entry.file_name().to_string_lossy().starts_with(&prefix))
        .collect();
    assert!(left.is_empty(), "the cluster's files were left: {left:?}");
}

#[test]
fn show_says_a_completed_jobs_error_was_an_earlier_attempts() {
    let (db, mut conn) = TestDb::connected();
    let id = enqueue_unregistered(&db);
    let lease = claim(&mut conn, &Claim::new("w")).expect("claim")[0].lease();
    fail(
        &mut conn,
        &Failure::retry(lease, "timeout talking to smtp", &Default::default()),
    )
    .expect("fail");
    jobqueue_tests::make_due(&mut conn);
    let lease = claim(&mut conn, &Claim::new("w")).expect("claim")[0].lease();
    jobqueue_core::engine::complete(&mut conn, &lease).expect("complete");
    let shown = ok(&db, &["show", &id]);
    assert!(
        shown.contains(
            "last error:    timeout talking to smtp (an earlier attempt's: the job was retried \
             and completed on attempt 2)"
        ),
        "{shown}"
    );
    let listed = ok(&db, &["list"]);
    assert!(
        listed.contains("(completed after a retry)") && !listed.contains("timeout talking"),
        "{listed}"
    );
}

#[test]
fn stats_prints_ages_people_can_read() {
    let db = TestDb::new();
    ok(
        &db,
        &[
            "enqueue",
            "x.y",
            "{}",
            "--force",
            "--queue",
            "old",
            "--run-at",
            "2000-01-01T00:00:00Z",
        ],
    );
    ok(&db, &["enqueue", "x.y", "{}", "--force", "--queue", "new"]);
    let stats = ok(&db, &["stats"]);
    let age = |queue: &str| {
        stats
            .lines()
            .find(|line| line.starts_with(queue))
            .and_then(|line| line.split_whitespace().last())
            .unwrap_or_else(|| panic!("no {queue} row in {stats}"))
            .to_owned()
    };
    let old = age("old");
    let years: f64 = old
        .strip_suffix('y')
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("`{old}` is not in years"));
    assert!((25.0..40.0).contains(&years), "{old}");
    let new = age("new");
    assert!(
        new.ends_with("ms") || new.ends_with('s') && new.len() <= 5,
        "a fresh job's age: `{new}`"
    );
}

#[test]
fn version_is_the_librarys() {
    let out = Command::new(CLI)
        .arg("--version")
        .output()
        .expect("run the CLI");
    assert!(out.status.success());
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        format!("jobqueue {}", jobqueue_core::VERSION)
    );
    assert_eq!(jobqueue_runner::VERSION, jobqueue_core::VERSION);
    assert_eq!(jobqueue_cli::VERSION, jobqueue_core::VERSION);
}

#[test]
fn work_says_what_it_works_and_refuses_to_work_nothing() {
    use jobqueue_tests::fault::Proc;
    let db = TestDb::new();
    let mut runner = Proc::spawn("worker", {
        let mut command = Command::new(CLI);
        command.args([
            "--database-url",
            &db.url,
            "work",
            "--concurrency",
            "2",
            "--queues",
            "mail,reports",
        ]);
        command
    });
    jobqueue_tests::wait_for("the start line", std::time::Duration::from_secs(20), || {
        runner.stderr().contains(
            "jobqueue-test-worker: working queues mail, reports with 2 workers; job types: bench.chaos, email.send, test.",
        )
    });
    runner.terminate(std::time::Duration::from_secs(20));

    // A binary that registers nothing: refused at once, before any runner.
    let code = jobqueue_cli::Cli::new().main_from(["jobqueue", "--database-url", &db.url, "work"]);
    assert_eq!(code, std::process::ExitCode::from(2));
    let mut conn = db.conn();
    assert_eq!(
        jobqueue_tests::other_sessions(&mut conn),
        0,
        "no runner connected"
    );
}

#[test]
fn the_applications_state_is_built_for_work_only_from_the_url_it_resolved() {
    use jobqueue_tests::fault::Proc;
    let db = TestDb::new();
    let log = std::env::temp_dir().join(format!(
        "jq-state-{}-{}",
        std::process::id(),
        fastrand::u32(..)
    ));
    let built = || std::fs::read_to_string(&log).unwrap_or_default();
    let run = |args: &[&str]| {
        Command::new(CLI)
            .env("JOBQUEUE_TEST_STATE_LOG", &log)
            .env_remove("DATABASE_URL")
            .args(args)
            .output()
            .expect("run the CLI")
    };
    // Neither --help, migrate, an admin command nor a refused flag of
    // `work` builds it.
    assert!(run(&["--help"]).status.success());
    assert!(
        run(&["--database-url", &db.url, "migrate"])
            .status
            .success()
    );
    assert!(run(&["--database-url", &db.url, "stats"]).status.success());
    let refused = run(&["--database-url", &db.url, "work", "--concurrency", "0"]);
    assert_eq!(refused.status.code(), Some(2), "{refused:?}");
    assert_eq!(built(), "", "built for a command that runs no handler");
    // `work` builds it once, from the URL of --database-url.
    let mut runner = Proc::spawn("worker", {
        let mut command = Command::new(CLI);
        command
            .env("JOBQUEUE_TEST_STATE_LOG", &log)
            .env("DATABASE_URL", "postgres://nobody@127.0.0.1:1/not_this_one")
            .args(["--database-url", &db.url, "work", "--concurrency", "1"]);
        command
    });
    jobqueue_tests::wait_for("the start line", std::time::Duration::from_secs(20), || {
        runner
            .stderr()
            .contains("jobqueue-test-worker: working every queue")
    });
    runner.terminate(std::time::Duration::from_secs(20));
    assert_eq!(built(), format!("{}\n", db.url));
    // A state that fails stops `work` before it claims anything, with the
    // application's message under the binary's name.
    let mut conn = db.conn();
    jobqueue_tests::enqueue_all(&mut conn, [jobqueue_tests::jobs::Noop { n: 1 }]);
    let failed = Command::new(CLI)
        .env("JOBQUEUE_TEST_STATE_FAIL", "the cache at 10.0.0.9 refused")
        .args(["--database-url", &db.url, "work"])
        .output()
        .expect("run the CLI");
    assert_eq!(failed.status.code(), Some(1));
    assert_eq!(
        String::from_utf8_lossy(&failed.stderr).trim(),
        "jobqueue-test-worker: error: building the application's state for the handlers: \
         the cache at 10.0.0.9 refused"
    );
    assert_eq!(
        jobqueue_tests::count_where(&mut conn, "status = 'pending'"),
        1
    );
    let _ = std::fs::remove_file(&log);
}
