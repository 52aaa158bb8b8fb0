//! `jobqueue doctor`: each check is provoked for real and seen to warn or
//! fail, then to pass once its cause is gone. Conditions that are
//! server-wide (open and prepared transactions, replication slots, the
//! NOTIFY queue, connections) are provoked on a PostgreSQL cluster of the
//! test's own, so that other tests on the shared server neither see them
//! nor disturb them; the others use a database of their own.

use std::time::Duration;

use diesel::prelude::*;
use jobqueue_core::{Check, CheckStatus, DoctorOptions, Job};
use jobqueue_tests::fault::{OwnCluster, Proc, runner_flags};
use jobqueue_tests::jobs::{Noop, Sleep};
use jobqueue_tests::{
    TestDb, assert_contains, autovacuum_off, exec, read_job, run_cli, scalar, wait_for,
};

const WORKER: &str = env!("CARGO_BIN_EXE_jobqueue-test-worker");

/// Long enough for every condition here to show (stats flushed, a killed
/// runner gone); the waits end as soon as it does.
const WITHIN: Duration = Duration::from_secs(30);

/// The check `name` of a doctor run with `options`.
fn check(conn: &mut PgConnection, options: &DoctorOptions, name: &str) -> Check {
    let checks = jobqueue_core::doctor(conn, options).expect("run the doctor");
    checks
        .iter()
        .find(|check| check.name == name)
        .cloned()
        .unwrap_or_else(|| panic!("no check `{name}` in {checks:#?}"))
}

/// Waits until check `name` comes out as `status`; returns it. Each new
/// finding on the way is printed (shown when the test fails).
fn wait_status(
    conn: &mut PgConnection,
    options: &DoctorOptions,
    name: &str,
    status: CheckStatus,
) -> Check {
    let mut last: Option<Check> = None;
    wait_for(&format!("`{name}` to be {status}"), WITHIN, || {
        let found = check(conn, options, name);
        if last.as_ref() != Some(&found) {
            eprintln!(
                "{name}: {} {} / {}",
                found.status, found.evidence, found.advice
            );
        }
        let done = found.status == status;
        last = Some(found);
        done
    });
    last.expect("checked at least once")
}

fn assert_has(check: &Check, parts: &[&str]) {
    for part in parts {
        assert!(
            check.evidence.contains(part) || check.advice.contains(part),
            "`{part}` is not in {check:#?}"
        );
    }
}

/// The check `name` of a doctor run with `options`, asserted to be `status`.
fn check_is(
    conn: &mut PgConnection,
    options: &DoctorOptions,
    name: &str,
    status: CheckStatus,
) -> Check {
    let found = check(conn, options, name);
    assert_eq!(found.status, status, "{found:#?}");
    found
}

/// Runs the command line with `args` on the database at `url`, asserting
/// that it exits with `code`; returns its stdout and stderr.
fn doctor_cli(url: &str, args: &[&str], code: i32) -> (String, String) {
    let (exit, out, err) = run_cli(WORKER, url, args);
    assert_eq!(exit, Some(code), "{args:?}: {out}{err}");
    (out, err)
}

/// Asserts that the command line printed check `name` as `status` (`ok`,
/// `warn` or `fail`).
fn assert_line(out: &str, name: &str, status: &str) {
    let printed = line(out, name);
    assert_eq!(printed[..6].trim_end(), status, "{out}");
}

/// The line the command line printed for check `name`.
fn line<'a>(out: &'a str, name: &str) -> &'a str {
    out.lines()
        .find(|line| line.get(6..).is_some_and(|rest| rest.starts_with(name)))
        .unwrap_or_else(|| panic!("no line for `{name}` in:\n{out}"))
}

/// Makes the statistics this session collected visible to every session
/// from its next statement on (they are otherwise sent at most once a
/// second, when it goes idle).
fn flush_stats(conn: &mut PgConnection) {
    exec(conn, "SELECT pg_stat_force_next_flush()");
}

/// Inserts `n` jobs of type `job_type` in `status` (pending or completed)
/// in one statement.
fn insert(conn: &mut PgConnection, n: usize, job_type: &str, status: &str) {
    let finished_at = if status == "completed" {
        "now()"
    } else {
        "NULL"
    };
    exec(
        conn,
        &format!(
            "INSERT INTO jobqueue_jobs (id, job_type, status, run_at, finished_at)
             SELECT gen_random_uuid(), '{job_type}', '{status}', now(), {finished_at}
             FROM generate_series(1, {n})"
        ),
    );
}

/// Turns autovacuum off for the jobs table, then inserts 20,000 completed
/// jobs of type `job_type`: rows that stay as they are until the test
/// vacuums or analyzes them.
fn unvacuumed_history(conn: &mut PgConnection, job_type: &str) {
    autovacuum_off(conn);
    insert(conn, 20_000, job_type, "completed");
}

#[test]
fn an_open_transaction_warns_then_fails_past_its_thresholds_until_it_ends() {
    let server = OwnCluster::start_with(&[]);
    let mut conn = server.conn();
    let mut idle = server.conn_as("doctor-test-idle");
    let pid = scalar(&mut idle, "SELECT pg_backend_pid()::int8 AS n");
    exec(&mut idle, "BEGIN; SELECT txid_current();");

    let mut options = DoctorOptions::default();
    options.xact_warn = Duration::from_millis(200);
    let found = wait_status(&mut conn, &options, "vacuum horizon", CheckStatus::Warn);
    assert_has(
        &found,
        &[
            &format!("pid {pid}"),
            "doctor-test-idle",
            "idle in transaction",
            "holds the xmin horizon",
            "SELECT txid_current()",
            &format!("pg_terminate_backend({pid})"),
        ],
    );

    // The command line, for real: a warning alone exits 0, a failure 1.
    let (out, _) = doctor_cli(&server.url, &["doctor", "--xact-warn", "200ms"], 0);
    assert_line(&out, "vacuum horizon", "warn");
    assert_contains(&out, &["\n      -> end it: commit or roll back"]);
    let strict = ["doctor", "--xact-warn", "100ms", "--xact-fail", "200ms"];
    let (out, err) = doctor_cli(&server.url, &strict, 1);
    assert_line(&out, "vacuum horizon", "fail");
    assert_contains(&err, &["1 of 15 checks failed: vacuum horizon"]);

    exec(&mut idle, "COMMIT");
    let (out, _) = doctor_cli(&server.url, &strict, 0);
    assert_line(&out, "vacuum horizon", "ok");
    assert!(out.ends_with("15 checks: 15 ok, 0 warn, 0 fail\n"), "{out}");
}

#[test]
fn a_replication_slot_holding_a_horizon_warns_while_inactive_and_fails_past_its_age() {
    let server = OwnCluster::start_with(&[("wal_level", "logical")]);
    let mut conn = server.conn();
    let options = DoctorOptions::default();

    // A physical slot (no standby feeding it back) keeps WAL, no horizon.
    exec(
        &mut conn,
        "SELECT pg_create_physical_replication_slot('doctor_physical', true)",
    );
    check_is(&mut conn, &options, "replication slots", CheckStatus::Ok);

    // A logical slot nothing reads from holds its catalog_xmin for good.
    exec(
        &mut conn,
        "SELECT pg_create_logical_replication_slot('doctor_logical', 'pgoutput')",
    );
    let found = check_is(&mut conn, &options, "replication slots", CheckStatus::Warn);
    assert_has(
        &found,
        &[
            "slot doctor_logical (logical, inactive) holds catalog_xmin",
            "of WAL",
            "SELECT pg_drop_replication_slot('doctor_logical')",
        ],
    );

    // Transactions since its horizon age it past the fail threshold.
    for _ in 0..5 {
        exec(&mut conn, "SELECT txid_current()");
    }
    let mut strict = DoctorOptions::default();
    strict.slot_warn_xids = 1;
    strict.slot_fail_xids = 5;
    check_is(&mut conn, &strict, "replication slots", CheckStatus::Fail);
    let flags = ["doctor", "--slot-warn-xids", "1", "--slot-fail-xids", "5"];
    let (out, _) = doctor_cli(&server.url, &flags, 1);
    assert_line(&out, "replication slots", "fail");

    exec(
        &mut conn,
        "SELECT pg_drop_replication_slot('doctor_logical')",
    );
    check_is(&mut conn, &strict, "replication slots", CheckStatus::Ok);
}

#[test]
fn a_prepared_transaction_left_behind_fails_until_it_is_finished() {
    let server = OwnCluster::start_with(&[("max_prepared_transactions", "2")]);
    let mut conn = server.conn();
    let mut options = DoctorOptions::default();
    options.xact_warn = Duration::from_millis(100);
    options.xact_fail = Duration::from_millis(300);
    let mut other = server.conn();
    exec(
        &mut other,
        "BEGIN; SELECT txid_current(); PREPARE TRANSACTION 'doctor-test';",
    );
    let found = wait_status(&mut conn, &options, "prepared xacts", CheckStatus::Fail);
    assert_has(
        &found,
        &[
            "prepared transaction 'doctor-test'",
            "owner postgres",
            "ROLLBACK PREPARED 'doctor-test'",
        ],
    );
    exec(&mut other, "ROLLBACK PREPARED 'doctor-test'");
    check_is(&mut conn, &options, "prepared xacts", CheckStatus::Ok);
}

#[test]
fn a_listener_that_does_not_read_fills_the_notify_queue_until_it_goes() {
    let server = OwnCluster::start_with(&[]);
    let mut conn = server.conn();
    // A session that listens, then sits in a transaction: it reads no
    // notification until the transaction ends, so all of them stay queued.
    let mut listener = server.conn_as("doctor-test-listener");
    exec(&mut listener, "LISTEN doctor_test");
    exec(&mut listener, "BEGIN; SELECT 1;");
    exec(
        &mut conn,
        "SELECT count(pg_notify('doctor_test', g::text)) FROM generate_series(1, 100000) AS g",
    );
    // 100,000 notifications fill a few hundredths of a percent of the
    // queue: the thresholds are set below that.
    let mut warn_only = DoctorOptions::default();
    warn_only.notify_warn = 0.000_01;
    check_is(&mut conn, &warn_only, "notify queue", CheckStatus::Warn);
    let mut strict = DoctorOptions::default();
    strict.notify_warn = 0.000_01;
    strict.notify_fail = 0.000_1;
    let found = check_is(&mut conn, &strict, "notify queue", CheckStatus::Fail);
    assert_has(&found, &["LISTEN/NOTIFY queue 0.0", "pg_terminate_backend"]);
    let (out, _) = doctor_cli(
        &server.url,
        &[
            "doctor",
            "--notify-warn",
            "0.001%",
            "--notify-fail",
            "0.01%",
        ],
        1,
    );
    assert_line(&out, "notify queue", "fail");

    drop(listener);
    wait_status(&mut conn, &strict, "notify queue", CheckStatus::Ok);
}

#[test]
fn connections_near_the_limit_warn_then_fail_until_they_close() {
    // 12 connections, 3 kept for superusers: 9 open to the others.
    let server = OwnCluster::start_with(&[("max_connections", "12")]);
    let mut conn = server.conn();
    let options = DoctorOptions::default();
    let mut held: Vec<PgConnection> = (0..6).map(|_| server.conn()).collect();
    let found = wait_status(&mut conn, &options, "connections", CheckStatus::Ok);
    assert_has(
        &found,
        &["7 of 9 connections in use (78 %; max_connections 12, 3 reserved)"],
    );
    held.push(server.conn());
    wait_status(&mut conn, &options, "connections", CheckStatus::Warn);
    held.push(server.conn());
    let found = wait_status(&mut conn, &options, "connections", CheckStatus::Fail);
    assert_has(&found, &["9 of 9 connections in use (100 %", "pooler"]);

    // The command line's own connection is the tenth (a superuser's).
    let (out, err) = doctor_cli(&server.url, &["doctor"], 1);
    assert_line(&out, "connections", "fail");
    assert_contains(&err, &["checks failed: connections"]);

    drop(held);
    wait_status(&mut conn, &options, "connections", CheckStatus::Ok);
    doctor_cli(&server.url, &["doctor"], 0);
}

#[test]
fn jobs_held_past_their_lease_by_a_killed_runner_fail_until_recovered() {
    let (db, mut conn) = TestDb::with_side_tables();
    let options = DoctorOptions::default();
    let flags = runner_flags(&[("lease-secs", "1"), ("concurrency", "1")]);
    let runner = Proc::runner(WORKER, &db.url, "doctor-held", &flags);
    let id = Sleep { ms: 120_000 }
        .enqueue(&mut conn)
        .expect("enqueue")
        .id();
    wait_for("the job to run", WITHIN, || {
        read_job(&mut conn, id).status == jobqueue_core::JobStatus::Running
    });
    let found = check_is(&mut conn, &options, "held leases", CheckStatus::Ok);
    assert_has(&found, &["1 held job(s), all within their lease"]);

    // Killed, the runner renews nothing; three leases on it is gone, and
    // no live runner is left to recover its job.
    runner.signal("KILL");
    let found = wait_status(&mut conn, &options, "held leases", CheckStatus::Fail);
    assert_has(
        &found,
        &[
            "1 held job(s) past their lease: 1 job(s) of doctor-held (gone, last seen",
            "no live runner to recover them",
            "start a runner",
        ],
    );

    let rescued = jobqueue_core::engine::rescue_stale(&mut conn, 10).expect("rescue");
    assert_eq!(rescued.requeued, vec![id]);
    check_is(&mut conn, &options, "held leases", CheckStatus::Ok);
}

#[test]
fn jobs_of_a_type_no_live_runner_handles_warn_when_scheduled_and_fail_when_due() {
    let (db, mut conn) = TestDb::with_side_tables();
    let options = DoctorOptions::default();
    Noop { n: 1 }
        .options()
        .delay(Duration::from_secs(3600))
        .enqueue(&mut conn)
        .expect("enqueue")
        .id();
    let found = check_is(&mut conn, &options, "job types", CheckStatus::Warn);
    assert_has(
        &found,
        &["no live runner handles test.noop in queue default (1 scheduled)"],
    );

    let due = Noop { n: 2 }.enqueue(&mut conn).expect("enqueue").id();
    let found = check_is(&mut conn, &options, "job types", CheckStatus::Fail);
    assert_has(&found, &["test.noop in queue default (1 due, 1 scheduled)"]);

    // A runner that handles the type: the due job runs, and the scheduled
    // one has a runner for when it is due.
    let _runner = Proc::runner(WORKER, &db.url, "doctor-types", &runner_flags(&[]));
    let found = wait_status(&mut conn, &options, "job types", CheckStatus::Ok);
    assert_has(&found, &["a live runner handles each of the 1 type(s)"]);
    jobqueue_tests::wait_completed(&mut conn, due, WITHIN);
}

#[test]
fn a_queue_with_due_jobs_and_no_live_runner_fails_until_one_works_it() {
    let (db, mut conn) = TestDb::with_side_tables();
    let options = DoctorOptions::default();
    let flags = |queues: &str| runner_flags(&[("queues", queues)]);
    let _mail = Proc::runner(WORKER, &db.url, "doctor-mail", &flags("mail"));
    wait_for("the mail runner to register", WITHIN, || {
        jobqueue_core::list_runners(&mut conn)
            .expect("list runners")
            .iter()
            .any(|r| r.worker_id == "doctor-mail")
    });
    let id = Noop { n: 1 }
        .options()
        .queue("media")
        .enqueue(&mut conn)
        .expect("enqueue")
        .id();
    let found = check_is(&mut conn, &options, "queues", CheckStatus::Fail);
    assert_has(
        &found,
        &["no live runner works queue(s) media (1 due", "--queues"],
    );
    assert!(!found.evidence.contains("mail"), "{found:#?}");

    // Paused, the queue is claimed by no runner anyway.
    jobqueue_core::pause_queue(&mut conn, "media").expect("pause");
    let found = check_is(&mut conn, &options, "queues", CheckStatus::Ok);
    assert_has(&found, &["paused: media (1 due)"]);
    jobqueue_core::resume_queue(&mut conn, "media").expect("resume");
    check_is(&mut conn, &options, "queues", CheckStatus::Fail);

    let _media = Proc::runner(WORKER, &db.url, "doctor-media", &flags("media"));
    wait_status(&mut conn, &options, "queues", CheckStatus::Ok);
    jobqueue_tests::wait_completed(&mut conn, id, WITHIN);
}

#[test]
fn a_database_without_the_schema_fails_on_migrations_until_migrated() {
    let bare = TestDb::unmigrated();
    let mut conn = bare.conn();
    let options = DoctorOptions::default();
    let checks = jobqueue_core::doctor(&mut conn, &options).expect("run the doctor");
    let names: Vec<&str> = checks.iter().map(|c| c.name).collect();
    // The checks of the jobs table are left out; the server's run.
    assert_eq!(
        names,
        [
            "migrations",
            "vacuum horizon",
            "replication slots",
            "prepared xacts",
            "notify queue",
            "connections"
        ]
    );
    assert_eq!(checks[0].status, CheckStatus::Fail, "{:#?}", checks[0]);
    assert_has(
        &checks[0],
        &[
            "no jobqueue schema (no jobqueue_jobs table)",
            "`jobqueue migrate`",
        ],
    );

    let (out, err) = doctor_cli(&bare.url, &["doctor"], 1);
    assert_line(&out, "migrations", "fail");
    assert_contains(&out, &["      -> run `jobqueue migrate`"]);
    assert_contains(&err, &["checks failed: migrations"]);
    let (out, _) = doctor_cli(&bare.url, &["doctor", "--json"], 1);
    let report: serde_json::Value = serde_json::from_str(&out).expect("JSON");
    assert_eq!(report["status"], "fail");
    assert_eq!(report["checks"][0]["name"], "migrations");
    assert_eq!(report["checks"][0]["status"], "fail");
    assert_eq!(report["checks"][1]["advice"], "");

    // The doctor only read: it created nothing, not even the migrations table.
    assert_eq!(
        scalar(
            &mut conn,
            "SELECT count(*) AS n FROM pg_tables WHERE schemaname = 'public'"
        ),
        0
    );
    jobqueue_core::run_migrations(&mut conn).expect("migrate");
    let checks = jobqueue_core::doctor(&mut conn, &options).expect("run the doctor");
    assert_eq!(checks.len(), 15);
    assert_eq!(checks[0].status, CheckStatus::Ok, "{:#?}", checks[0]);
}

#[test]
fn an_empty_analyzed_table_passes_the_claim_plan_and_jobs_take_the_fetch_index() {
    let (_db, mut conn) = TestDb::connected();
    let options = DoctorOptions::default();
    // Statistics of an empty table (a prune emptied it, autovacuum
    // analyzed it): any plan costs nothing, yet the claim's update finds
    // its rows by the ids it picked, never by walking the primary key.
    exec(&mut conn, "ANALYZE jobqueue_jobs");
    let plan = check_is(&mut conn, &options, "claim plan", CheckStatus::Ok);
    assert_has(&plan, &["through jobqueue_jobs_fetch_idx"]);
    // Jobs arrive, the statistics stay: the claims read the fetch index.
    insert(&mut conn, 3, "doctor.plan", "pending");
    let plan = check_is(&mut conn, &options, "claim plan", CheckStatus::Ok);
    assert_has(&plan, &["through jobqueue_jobs_fetch_idx"]);
}

#[test]
fn a_missing_fetch_index_fails_the_claim_plan_until_it_is_recreated() {
    let (_db, mut conn) = TestDb::connected();
    let options = DoctorOptions::default();
    insert(&mut conn, 3, "doctor.plan", "pending");
    for name in ["claim plan", "fetch index"] {
        check_is(&mut conn, &options, name, CheckStatus::Ok);
    }

    exec(&mut conn, "DROP INDEX jobqueue_jobs_fetch_idx");
    assert_has(
        &check_is(&mut conn, &options, "claim plan", CheckStatus::Fail),
        &[
            "the claim of every queue reads jobqueue_jobs by",
            "not through jobqueue_jobs_fetch_idx",
        ],
    );
    let index = check_is(&mut conn, &options, "fetch index", CheckStatus::Fail);
    assert_has(&index, &["jobqueue_jobs_fetch_idx is missing"]);

    // The advice, as given, brings it back.
    let recreate = index
        .advice
        .strip_prefix("recreate it: ")
        .unwrap_or_else(|| panic!("{index:#?}"));
    exec(&mut conn, recreate);
    for name in ["claim plan", "fetch index"] {
        check_is(&mut conn, &options, name, CheckStatus::Ok);
    }
}

#[test]
fn a_fetch_index_left_large_by_a_drained_backlog_warns_until_reindexed() {
    let (_db, mut conn) = TestDb::connected();
    let options = DoctorOptions::default();
    insert(&mut conn, 30_000, "doctor.bloat", "pending");
    let found = check_is(&mut conn, &options, "fetch index", CheckStatus::Ok);
    assert_has(&found, &["for 30000 pending jobs"]);

    // The backlog drains; VACUUM empties the index's pages, which stay.
    exec(
        &mut conn,
        "UPDATE jobqueue_jobs SET status = 'completed', finished_at = now() \
         WHERE status = 'pending'",
    );
    exec(&mut conn, "VACUUM jobqueue_jobs");
    let found = check_is(&mut conn, &options, "fetch index", CheckStatus::Warn);
    assert_has(
        &found,
        &[
            "for 0 pending jobs (~",
            "x the size of a packed index)",
            "REINDEX INDEX CONCURRENTLY jobqueue_jobs_fetch_idx",
        ],
    );

    exec(
        &mut conn,
        "REINDEX INDEX CONCURRENTLY jobqueue_jobs_fetch_idx",
    );
    check_is(&mut conn, &options, "fetch index", CheckStatus::Ok);
}

#[test]
fn dead_row_versions_warn_and_fail_by_their_share_until_vacuumed() {
    let (_db, mut conn) = TestDb::connected();
    let options = DoctorOptions::default();
    unvacuumed_history(&mut conn, "doctor.dead");
    exec(
        &mut conn,
        "DELETE FROM jobqueue_jobs WHERE id IN (SELECT id FROM jobqueue_jobs LIMIT 15000)",
    );
    flush_stats(&mut conn);
    // 15,000 dead of 20,000: 75 %.
    let found = wait_status(&mut conn, &options, "dead tuples", CheckStatus::Fail);
    assert_has(
        &found,
        &[
            "15000 dead of 20000 row versions in jobqueue_jobs (75 %)",
            "autovacuum is off",
            "VACUUM jobqueue_jobs",
        ],
    );
    // Under a higher fail threshold, a warning; with fewer dead rows
    // than the least it reports on, nothing.
    let mut lenient = options.clone();
    lenient.dead_fail = 0.9;
    let mut few = options.clone();
    few.dead_min = 20_000;
    for (options, status) in [(lenient, CheckStatus::Warn), (few, CheckStatus::Ok)] {
        check_is(&mut conn, &options, "dead tuples", status);
    }

    exec(&mut conn, "VACUUM jobqueue_jobs");
    let found = wait_status(&mut conn, &options, "dead tuples", CheckStatus::Ok);
    assert_has(&found, &["0 dead of 5000 row versions", "ago (VACUUM)"]);
}

#[test]
fn the_checks_never_scan_the_jobs_table() {
    let (_db, mut conn) = TestDb::connected();
    unvacuumed_history(&mut conn, "doctor.history");
    insert(&mut conn, 10, "doctor.live", "pending");
    exec(&mut conn, "ANALYZE jobqueue_jobs");
    let scans = |conn: &mut PgConnection| {
        flush_stats(conn);
        let seq = scalar(
            conn,
            "SELECT seq_scan AS n FROM pg_stat_user_tables WHERE relname = 'jobqueue_jobs'",
        );
        let idx = scalar(
            conn,
            "SELECT idx_scan AS n FROM pg_stat_user_tables WHERE relname = 'jobqueue_jobs'",
        );
        (seq, idx)
    };
    let (seq_before, idx_before) = scans(&mut conn);
    let checks = jobqueue_core::doctor(&mut conn, &DoctorOptions::default()).expect("doctor");
    assert_eq!(checks.len(), 15);
    let (seq_after, idx_after) = scans(&mut conn);
    assert!(idx_after > idx_before, "the checks read the indexes");
    assert_eq!(
        seq_after, seq_before,
        "a check scanned the whole jobs table"
    );
}

#[test]
fn a_role_that_may_not_read_what_a_check_reads_gets_that_check_failed_and_the_rest_run() {
    let server = OwnCluster::start_with(&[]);
    let mut conn = server.conn();
    exec(&mut conn, "CREATE ROLE doctor_reader LOGIN");
    let url = server.url.replace("postgres@", "doctor_reader@");
    let mut reader = PgConnection::establish(&url).expect("connect as doctor_reader");
    let checks =
        jobqueue_core::doctor(&mut reader, &DoctorOptions::default()).expect("run the doctor");
    let migrations = &checks[0];
    assert_eq!(migrations.status, CheckStatus::Fail, "{checks:#?}");
    assert_has(
        migrations,
        &[
            "could not check: database error: permission denied for table \
             jobqueue_schema_migrations",
            "run the doctor as a role that may read what it checks",
        ],
    );
    // The server's checks still ran; the horizon says what it could not see.
    assert_eq!(checks.len(), 6, "{checks:#?}");
    let horizon = &checks[1];
    assert_eq!(horizon.status, CheckStatus::Ok, "{horizon:#?}");
    assert_has(horizon, &["only this role's sessions are visible"]);
}

#[test]
fn contradictory_or_malformed_thresholds_are_a_wrong_command_line() {
    // Refused before connecting: this URL leads nowhere.
    let nowhere = "postgres://postgres@127.0.0.1:1/none";
    let cases: [(&[&str], &str); 5] = [
        (&["--xact-warn", "30"], "`30` has no unit"),
        (&["--xact-fail", "5 parsecs"], "is not a unit"),
        (&["--dead-warn", "120%"], "not between 0% and 100%"),
        (
            &["--xact-warn", "1h", "--xact-fail", "5m"],
            "invalid transaction thresholds: warn at 1h 00m is above fail at 5m 00s",
        ),
        (
            &["--connections-warn", "99%"],
            "invalid connection thresholds: warn at 99 % is above fail at 95 %",
        ),
    ];
    for (flags, message) in cases {
        let args: Vec<&str> = std::iter::once("doctor")
            .chain(flags.iter().copied())
            .collect();
        let (code, out, err) = run_cli(WORKER, nowhere, &args);
        assert_eq!(code, Some(2), "{flags:?}: {out}{err}");
        assert!(err.contains(message), "{flags:?}: {err}");
    }
}

#[test]
fn workflows_waiting_on_a_retry_warn_and_ends_nobody_settles_fail() {
    let (_db, mut conn) = TestDb::connected();
    let options = DoctorOptions::default();
    let found = check_is(&mut conn, &options, "workflows", CheckStatus::Ok);
    assert_has(&found, &["every ended step is settled"]);
    let job = || {
        jobqueue_core::NewJob::new("flow.step", "{}", jobqueue_core::JobOptions::new())
            .expect("job")
    };
    let mut flow = jobqueue_core::Workflow::new("waits").expect("workflow");
    flow.on_failure(jobqueue_core::OnFailure::Wait);
    let first = flow.add_job("first", job()).expect("step");
    let then = flow.add_job("then", job()).expect("step");
    flow.after(then, [first]).expect("edge");
    flow.enqueue(&mut conn).expect("enqueue");
    // The first step fails for good; no runner has settled it yet.
    exec(
        &mut conn,
        &format!(
            "UPDATE jobqueue_jobs SET status = 'failed', finished_at = now() - interval '2 minutes'
             WHERE id = '{}'",
            first.id()
        ),
    );
    let found = check_is(&mut conn, &options, "workflows", CheckStatus::Fail);
    assert_has(
        &found,
        &["1 workflow steps ended over a minute ago", "start a runner"],
    );
    // Settled (as a runner would): the step after it waits for a retry.
    jobqueue_core::engine::settle_ended(&mut conn, 100).expect("settle");
    let found = check_is(&mut conn, &options, "workflows", CheckStatus::Warn);
    assert_has(
        &found,
        &["1 workflow steps wait for a retry", "jobqueue retry ID"],
    );
    // A step whose job row was deleted outside the queue fails the check.
    exec(
        &mut conn,
        &format!("DELETE FROM jobqueue_jobs WHERE id = '{}'", then.id()),
    );
    let found = check_is(&mut conn, &options, "workflows", CheckStatus::Fail);
    assert_has(&found, &["1 steps not ended have no job row"]);
}

/// A blocked workflow step with no parent left to settle (what a lost
/// release leaves) fails the `workflows` check until the cancel and retry
/// its advice names make it due; jobs of a key that has room, waiting for
/// over a minute, warn under `keys` until an admission admits them.
#[test]
fn a_stranded_step_fails_and_keyed_jobs_waiting_with_room_warn_until_repaired() {
    let (_db, mut conn) = TestDb::connected();
    let options = DoctorOptions::default();
    let job = || {
        jobqueue_core::NewJob::new("flow.step", "{}", jobqueue_core::JobOptions::new())
            .expect("job")
    };
    let mut flow = jobqueue_core::Workflow::new("stranded").expect("workflow");
    let first = flow.add_job("first", job()).expect("step");
    let then = flow.add_job("then", job()).expect("step");
    flow.after(then, [first]).expect("edge");
    flow.enqueue(&mut conn).expect("enqueue");
    check_is(&mut conn, &options, "workflows", CheckStatus::Ok);
    exec(
        &mut conn,
        &format!(
            "UPDATE jobqueue_workflow_steps SET parents_left = 0 WHERE job_id = '{}'",
            then.id()
        ),
    );
    let found = check_is(&mut conn, &options, "workflows", CheckStatus::Fail);
    assert_has(
        &found,
        &[
            "1 workflow steps are blocked with no parent left to settle",
            "`jobqueue cancel ID`, then `jobqueue retry ID`",
        ],
    );
    jobqueue_core::cancel(&mut conn, then.id()).expect("cancel");
    jobqueue_core::retry_job(&mut conn, then.id()).expect("retry");
    assert_eq!(
        jobqueue_tests::read_job(&mut conn, then.id()).status,
        jobqueue_core::JobStatus::Pending
    );
    check_is(&mut conn, &options, "workflows", CheckStatus::Ok);

    let found = check_is(&mut conn, &options, "keys", CheckStatus::Ok);
    assert_has(&found, &["no key's jobs wait"]);
    // As an admission that never came leaves it: waiting, due long ago.
    ledger_job_left_waiting(&mut conn, "run_at = now() - interval '2 minutes'");
    let found = check_is(&mut conn, &options, "keys", CheckStatus::Warn);
    assert_has(
        &found,
        &[
            "jobs of 1 keys (such as ledger/acct-1)",
            "start a runner of their queue",
        ],
    );
    let swept = jobqueue_core::engine::sweep_keys(&mut conn, &[], None, 100).expect("sweep");
    assert_eq!(swept.admitted, 1);
    check_is(&mut conn, &options, "keys", CheckStatus::Ok);
}

/// A job of key `acct-1` of queue `ledger` (one job per key at a time),
/// left `waiting` with `set` (an SQL assignment) too, as if no admission
/// had looked at it yet.
fn ledger_job_left_waiting(conn: &mut PgConnection, set: &str) {
    let keyed = jobqueue_core::NewJob::from_job(
        &Noop { n: 1 },
        jobqueue_core::JobOptions::new()
            .queue("ledger")
            .concurrency_key("acct-1"),
    )
    .expect("job");
    jobqueue_core::enqueue_many(conn, &[keyed]).expect("enqueue");
    jobqueue_core::set_queue_key_limit(
        conn,
        "ledger",
        Some(jobqueue_core::KeyLimit::per_key(1).expect("limit")),
    )
    .expect("limit");
    exec(
        conn,
        &format!("UPDATE jobqueue_jobs SET status = 'waiting', {set} WHERE queue = 'ledger'"),
    );
}

/// A runner whose maintenance pass cannot end (its admission of keyed jobs
/// waits for a queue's admission lock another session holds) warns under
/// `maintenance`, naming the runner and the pass, while the runner itself
/// stays alive; once the lock is released, the check is ok again.
#[test]
fn a_runner_whose_maintenance_pass_does_not_end_warns_until_it_does() {
    let (db, mut conn) = TestDb::connected();
    ledger_job_left_waiting(&mut conn, "key_checked = NULL");
    // The queue's admission lock (class `jqky`), which admissions wait for.
    let mut holder = db.conn();
    exec(
        &mut holder,
        "SELECT pg_advisory_lock(1785817977, hashtext('ledger'))",
    );
    let config = jobqueue_runner::RunnerConfig::new(&db.url)
        .lease(Duration::from_secs(3))
        .db_timeout(Duration::from_secs(600));
    let runner = jobqueue_tests::start_runner(config, jobqueue_tests::jobs::registry());
    let mut options = DoctorOptions::default();
    options.maintenance_warn = Duration::from_secs(2);
    let found = wait_status(&mut conn, &options, "maintenance", CheckStatus::Warn);
    assert_has(
        &found,
        &[
            "the maintenance of 1 live runner(s) is stuck",
            "in `admitting keyed jobs`",
            "promotes no retries",
        ],
    );
    let mut strict = DoctorOptions::default();
    strict.maintenance_warn = Duration::from_secs(1);
    strict.maintenance_fail = Duration::from_secs(2);
    wait_status(&mut conn, &strict, "maintenance", CheckStatus::Fail);
    exec(
        &mut holder,
        "SELECT pg_advisory_unlock(1785817977, hashtext('ledger'))",
    );
    let found = wait_status(&mut conn, &options, "maintenance", CheckStatus::Ok);
    assert_has(&found, &["each of the 1 live runner(s) that report it"]);
    runner.shutdown();
}
