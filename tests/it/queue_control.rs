//! Queue control: pauses that hold across runner processes and restarts,
//! a global limit that holds across runners (and the claim's count of a
//! limited queue's held jobs, taken only when needed), a runner's own per-queue
//! concurrency, snoozes, fair turns between queues, and the command line's
//! answers to bad input; key limits set, shown and refused by the command
//! line.

use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use diesel::connection::SimpleConnection;
use diesel::prelude::*;
use jobqueue_core::engine::{self, Claim};
use jobqueue_core::{Job, JobOptions, JobStatus};
use jobqueue_runner::{JobContext, JobError, Perform, Registry, Runner, RunnerConfig};
use jobqueue_tests::fault::{Proc, runner_flags};
use jobqueue_tests::jobs::Sleep;
use jobqueue_tests::{
    TestDb, count_where, enqueue_all_with, read_job, scalar, start_runner, wait_count, wait_for,
};
use serde::{Deserialize, Serialize};

const WORKER: &str = env!("CARGO_BIN_EXE_jobqueue-test-worker");

fn cli(db: &TestDb, args: &[&str]) -> (Option<i32>, String, String) {
    jobqueue_tests::run_cli(WORKER, &db.url, args)
}

fn ok(db: &TestDb, args: &[&str]) -> String {
    let (code, stdout, stderr) = cli(db, args);
    assert_eq!(code, Some(0), "{args:?}: {stderr}");
    stdout
}

fn sleeps(conn: &mut PgConnection, queue: &str, n: usize, ms: u64) {
    enqueue_all_with(
        conn,
        (0..n).map(|_| Sleep { ms }),
        &JobOptions::new().queue(queue),
    );
}

/// The fields of `queue`'s line in `queue list`.
fn listed_queue(db: &TestDb, queue: &str) -> Vec<String> {
    let listed = ok(db, &["queue", "list"]);
    listed
        .lines()
        .find(|line| line.split_whitespace().next() == Some(queue))
        .unwrap_or_else(|| panic!("no queue {queue} in:\n{listed}"))
        .split_whitespace()
        .map(str::to_owned)
        .collect()
}

fn held(conn: &mut PgConnection, queue: &str) -> i64 {
    count_where(
        conn,
        &format!("queue = '{queue}' AND status IN ('claimed', 'running')"),
    )
}

#[test]
fn a_pause_holds_across_runner_processes_and_restarts() {
    let (db, mut conn) = TestDb::with_side_tables();
    let flags = runner_flags(&[("poll-interval-ms", "100"), ("queues", "media,mail")]);
    let mut runners: Vec<Proc> = (0..2)
        .map(|i| Proc::runner(WORKER, &db.url, &format!("pause-{i}"), &flags))
        .collect();
    // A long job is running when the pause comes: it finishes.
    sleeps(&mut conn, "media", 1, 1500);
    wait_for("the long job running", Duration::from_secs(20), || {
        jobqueue_tests::effects_where(&mut conn, "kind = 'start'") == 1
    });
    assert!(ok(&db, &["queue", "pause", "media"]).contains("paused queue media"));
    assert!(ok(&db, &["queue", "pause", "media"]).contains("already paused"));

    // Enqueueing into the paused queue works; nothing of it is claimed after
    // the pause, by any runner; the other queue goes on.
    sleeps(&mut conn, "media", 20, 1);
    sleeps(&mut conn, "mail", 20, 1);
    wait_for(
        "mail worked, the long job done",
        Duration::from_secs(20),
        || {
            count_where(&mut conn, "queue = 'mail' AND status = 'completed'") == 20
                && count_where(&mut conn, "queue = 'media' AND status = 'completed'") == 1
        },
    );
    // The mail jobs were claimed after the pause by the same claim
    // statements that cover the paused queue: none of those took its jobs.
    assert_eq!(
        count_where(&mut conn, "queue = 'media' AND status = 'pending'"),
        20
    );
    let claimed_after_pause = scalar(
        &mut conn,
        "SELECT count(*) AS n FROM jobqueue_jobs AS j, jobqueue_queues AS q
         WHERE q.name = 'media' AND j.queue = 'media' AND j.claimed_at > q.paused_at",
    );
    assert_eq!(claimed_after_pause, 0, "no claim from the paused queue");

    // Restart every runner: the pause is in the database, not in them.
    for runner in &mut runners {
        runner.terminate(Duration::from_secs(20));
    }
    let runners: Vec<Proc> = (0..2)
        .map(|i| Proc::runner(WORKER, &db.url, &format!("pause-again-{i}"), &flags))
        .collect();
    sleeps(&mut conn, "mail", 5, 1);
    wait_count(&mut conn, "queue = 'mail' AND status = 'completed'", 25);
    assert_eq!(
        count_where(&mut conn, "queue = 'media' AND status = 'pending'"),
        20
    );
    assert_eq!(listed_queue(&db, "media")[..3], ["media", "paused", "20"]);

    // Resumed: the runners are woken and work it.
    assert!(ok(&db, &["queue", "resume", "media"]).contains("resumed queue media"));
    wait_count(&mut conn, "queue = 'media' AND status = 'completed'", 21);
    assert!(ok(&db, &["queue", "resume", "media"]).contains("was not paused"));
    drop(runners);
}

#[test]
fn a_global_limit_holds_across_four_runner_processes() {
    let (db, mut conn) = TestDb::with_side_tables();
    ok(&db, &["queue", "limit", "api", "5"]);
    // Jobs of realistic length, far more than the limit, and another queue
    // the limit must not slow.
    sleeps(&mut conn, "api", 120, 40);
    sleeps(&mut conn, "other", 40, 40);
    let flags = runner_flags(&[("poll-interval-ms", "100"), ("concurrency", "4")]);
    let runners: Vec<Proc> = (0..4)
        .map(|i| Proc::runner(WORKER, &db.url, &format!("limited-{i}"), &flags))
        .collect();
    // The most held at once while the limit was 5, and after it was 8.
    let (mut most, mut most_raised) = (0, 0);
    let mut samples = 0;
    let mut killed = false;
    let mut raised = false;
    let deadline = Instant::now() + Duration::from_secs(90);
    loop {
        let now_held = held(&mut conn, "api");
        samples += 1;
        let limit = if raised { 8 } else { 5 };
        assert!(
            now_held <= limit,
            "{now_held} jobs of the queue held at once; its limit is {limit}"
        );
        if raised {
            most_raised = most_raised.max(now_held);
        } else {
            most = most.max(now_held);
        }
        let done = count_where(&mut conn, "queue = 'api' AND status = 'completed'");
        if !killed && done >= 30 {
            // A runner dies holding part of the limit: its jobs count until
            // their lease expires and they are recovered.
            runners[0].signal("KILL");
            killed = true;
        }
        if !raised && done >= 70 {
            ok(&db, &["queue", "limit", "api", "8"]);
            raised = true;
        }
        if done == 120 {
            break;
        }
        assert!(Instant::now() < deadline, "the limited queue never drained");
        // Sampling interval: the scenario, not a wait for a condition.
        std::thread::sleep(Duration::from_millis(3));
    }
    println!(
        "global limit: most held at once {most} under 5, {most_raised} under 8 ({samples} samples)"
    );
    assert!(
        most >= 5,
        "the limit was reached ({most}): the test measured something"
    );
    assert_eq!(
        count_where(&mut conn, "queue = 'other' AND status = 'completed'"),
        40
    );
    drop(runners);
}

/// A claim bounds a limited queue's held jobs by its last count plus what
/// claims took since, and counts again only when that bound leaves less
/// room than the claim could take: never over the limit, and a bound gone
/// stale as jobs finished does not starve the queue.
#[test]
fn a_global_limit_counts_held_jobs_again_only_when_the_bound_is_tight() {
    let (_db, mut conn) = TestDb::connected();
    sleeps(&mut conn, "capped", 20, 0);
    jobqueue_core::set_queue_limit(
        &mut conn,
        "capped",
        Some(jobqueue_core::GlobalLimit::new(5).expect("a limit")),
    )
    .expect("set the limit");
    let claim = Claim::new("w").limit(3);
    let take = |conn: &mut PgConnection, claim: &Claim| {
        let rows = engine::claim(conn, claim).expect("claim");
        assert!(held(conn, "capped") <= 5, "over the limit");
        rows
    };
    // Room for the whole claim: no count.
    let first = take(&mut conn, &claim);
    assert_eq!(first.len(), 3);
    // 3 held and 3 more asked for: counted, and only 2 taken.
    let second = take(&mut conn, &claim.clone().queues(["capped"]));
    assert_eq!(second.len(), 2);
    assert!(take(&mut conn, &claim).is_empty(), "at the limit");
    // Every held job finishes; the bound still says 5 until a count.
    let leases: Vec<_> = first.iter().chain(&second).map(|row| row.lease()).collect();
    engine::complete_many(&mut conn, &leases).expect("complete");
    assert_eq!(
        take(&mut conn, &claim).len(),
        3,
        "counted again, not starved"
    );
    assert_eq!(take(&mut conn, &claim.clone().queues(["capped"])).len(), 2);
}

#[test]
fn a_runner_holds_at_most_its_own_limit_of_a_queue() {
    let (db, mut conn) = TestDb::with_side_tables();
    sleeps(&mut conn, "mail", 40, 30);
    sleeps(&mut conn, "bulk", 40, 30);
    let mut config = RunnerConfig::new(&db.url)
        .keep_completed(jobqueue_tests::KEEP_COMPLETED)
        .concurrency(6);
    config.poll_interval = Duration::from_millis(100);
    config.queues = vec!["mail".into(), "bulk".into()];
    config.queue_concurrency.insert("mail".into(), 2);
    let runner = start_runner(config, jobqueue_tests::jobs::registry());
    let (mut most_mail, mut most_bulk) = (0, 0);
    while count_where(&mut conn, "status = 'completed'") < 80 {
        let mail = held(&mut conn, "mail");
        let bulk = held(&mut conn, "bulk");
        assert!(mail <= 2, "{mail} mail jobs held; this runner's limit is 2");
        most_mail = most_mail.max(mail);
        most_bulk = most_bulk.max(bulk);
        // Sampling interval: the scenario, not a wait for a condition.
        std::thread::sleep(Duration::from_millis(3));
    }
    runner.shutdown();
    assert_eq!(most_mail, 2, "the limit was reached");
    assert!(
        most_bulk >= 4,
        "the other workers took the other queue ({most_bulk})"
    );

    // A limit on a queue the runner does not work, or of zero, is refused.
    for (queues, mail_limit, refusal) in [
        (vec!["bulk".to_owned()], 2, "not among the queues worked"),
        (vec![], 0, "concurrency 0 for queue `mail`"),
    ] {
        let mut config = RunnerConfig::new(&db.url).keep_completed(jobqueue_tests::KEEP_COMPLETED);
        config.queues = queues;
        config.queue_concurrency.insert("mail".into(), mail_limit);
        let err = Runner::new(config, jobqueue_tests::jobs::registry())
            .start()
            .expect_err(refusal);
        assert!(err.to_string().contains(refusal), "{err}");
    }
}

/// Snoozes `times` times, then completes.
#[derive(Serialize, Deserialize, Job)]
#[job(type = "test.snoozer", max_attempts = 2)]
struct Snoozer {
    times: i32,
}

impl Perform for Snoozer {
    fn perform(&self, ctx: &mut JobContext<'_>) -> Result<(), JobError> {
        if ctx.row().snoozes < self.times {
            return Err(JobError::snooze(Duration::from_millis(20)));
        }
        Ok(())
    }
}

#[test]
fn snoozes_use_no_attempt_are_recorded_and_are_bounded() {
    let (db, mut conn) = TestDb::connected();
    let patient = Snoozer { times: 5 }
        .enqueue(&mut conn)
        .expect("enqueue")
        .id();
    let endless = Snoozer { times: i32::MAX }
        .enqueue(&mut conn)
        .expect("enqueue")
        .id();
    let mut config = RunnerConfig::new(&db.url)
        .keep_completed(jobqueue_tests::KEEP_COMPLETED)
        .concurrency(2);
    config.poll_interval = Duration::from_millis(20);
    config.max_snoozes = 8;
    let runner = start_runner(config, Registry::new().register::<Snoozer>());
    wait_count(&mut conn, "status IN ('completed', 'failed')", 2);
    let summary = runner.shutdown();
    let patient = read_job(&mut conn, patient);
    assert_eq!(
        (patient.status, patient.attempts, patient.snoozes),
        (JobStatus::Completed, 1, 5),
        "five snoozes, one attempt"
    );
    let history = patient.errors.as_array().expect("history");
    assert_eq!(history.len(), 5);
    assert!(
        history[0]["error"]
            .as_str()
            .is_some_and(|e| e.starts_with("snoozed for 0.020 s (snooze 1 of at most 8")),
        "{history:?}"
    );
    assert_eq!(patient.last_error, None, "a snooze is not an error");

    let endless = read_job(&mut conn, endless);
    assert_eq!((endless.status, endless.attempts), (JobStatus::Failed, 1));
    assert_eq!(endless.snoozes, 9);
    assert_eq!(
        endless.last_error.as_deref(),
        Some("snoozed 9 times, the most allowed (max_snoozes 8): gave up waiting")
    );
    assert_eq!(summary.stats.snoozed, 5 + 8);
}

/// Counts the jobs started so far; the quiet queue's job notes how many
/// had started before it.
#[derive(Serialize, Deserialize, Job)]
#[job(type = "test.fair")]
struct Fair {
    ms: u64,
    quiet: bool,
}

static STARTED: AtomicU32 = AtomicU32::new(0);
static QUIET_STARTED_AFTER: AtomicU32 = AtomicU32::new(u32::MAX);

impl Perform for Fair {
    fn perform(&self, _ctx: &mut JobContext<'_>) -> Result<(), JobError> {
        let before = STARTED.fetch_add(1, Ordering::SeqCst);
        if self.quiet {
            QUIET_STARTED_AFTER.store(before, Ordering::SeqCst);
        }
        std::thread::sleep(Duration::from_millis(self.ms));
        Ok(())
    }
}

#[test]
fn a_quiet_queues_job_does_not_wait_behind_another_queues_prefetched_jobs() {
    let (db, mut conn) = TestDb::connected();
    let bulk = (0..1500).map(|_| Fair {
        ms: 5,
        quiet: false,
    });
    enqueue_all_with(&mut conn, bulk, &JobOptions::new().queue("bulk"));
    // Two workers and 200 claimed jobs waiting for them: the runner is full
    // of the bulk queue's jobs when the quiet queue's job comes.
    const PREFETCH: u32 = 200;
    let mut config = RunnerConfig::new(&db.url)
        .keep_completed(jobqueue_tests::KEEP_COMPLETED)
        .concurrency(2);
    config.prefetch = Some(PREFETCH as usize);
    config.poll_interval = Duration::from_millis(200);
    let runner = start_runner(config, Registry::new().register::<Fair>());
    wait_for(
        "the runner full of bulk jobs",
        Duration::from_secs(20),
        || {
            STARTED.load(Ordering::SeqCst) >= 20
                && held(&mut conn, "bulk") >= i64::from(PREFETCH * 3 / 4)
        },
    );
    let started_at_enqueue = STARTED.load(Ordering::SeqCst);
    let quiet = Fair { ms: 0, quiet: true }
        .options()
        .queue("quiet")
        .enqueue(&mut conn)
        .expect("enqueue")
        .id();
    wait_for("the quiet job done", Duration::from_secs(30), || {
        jobqueue_tests::is_completed(&mut conn, quiet)
    });
    runner.shutdown();
    let ahead = QUIET_STARTED_AFTER.load(Ordering::SeqCst) - started_at_enqueue;
    println!(
        "bulk jobs started between the quiet job's enqueue and its start: {ahead} \
         (up to {PREFETCH} wait in the runner)"
    );
    // Claimed at once by an early claim (the runner is full, and the
    // fetcher would wait for half its room), it starts at the next free
    // worker: not behind the bulk jobs the runner had claimed before it.
    // Behind them, at least the 150 held at its enqueue would start first;
    // ahead of them, only those that start while its notification and
    // claim travel (a few on a quiet machine, 45 seen on one at load 9:
    // the count measures that time in 5 ms jobs). Half the prefetch tells
    // the two apart on a loaded machine too.
    assert!(
        ahead < PREFETCH / 2,
        "{ahead} bulk jobs started ahead of the quiet queue's job: it waited behind \
         the jobs the runner had claimed before it"
    );
}

#[test]
fn queue_commands_answer_bad_input_clearly() {
    let (db, mut conn) = TestDb::with_side_tables();
    sleeps(&mut conn, "mail", 1, 1);
    let refused = |args: &[&str], expect: &str| {
        let (code, _, stderr) = cli(&db, args);
        assert_eq!(code, Some(2), "{args:?}: {stderr}");
        assert!(stderr.contains(expect), "{args:?}: {stderr}");
    };
    refused(
        &["queue", "resume", "mial"],
        "no queue named `mial`: no job, setting, schedule or runner's --queues names it \
         (a runner of every queue names none); the queues are: mail",
    );
    refused(
        &["queue", "limit", "mail", "0"],
        "invalid queue limit: 0 is not a limit",
    );
    refused(
        &["queue", "limit", "mail", "-3"],
        "invalid queue limit: -3 is not a limit",
    );
    refused(&["queue", "pause", "bad name;"], "invalid queue");
    refused(
        &["work", "--queues", "mail=0"],
        "concurrency 0 for queue `mail`",
    );
    refused(
        &["work", "--queues", "mail=x"],
        "after `=` comes this runner's most jobs",
    );
    refused(&["work", "--queues", "mail,mail"], "names `mail` twice");
    // Pausing or limiting a queue no job names yet is allowed, and said.
    assert!(ok(&db, &["queue", "pause", "later"]).contains("no job names it yet"));
    assert!(ok(&db, &["queue", "limit", "someday", "2"]).contains("(no job names it yet"));
    assert!(!ok(&db, &["queue", "limit", "later", "3"]).contains("(no job names it yet"));
    assert_eq!(
        listed_queue(&db, "later"),
        [
            "later", "paused", "0", "0", "0", "0", "0", "0", "-", "3", "-", "-", "-", "-"
        ]
    );
    assert!(ok(&db, &["queue", "limit", "later", "--none"]).contains("no limit"));
    // Enqueueing into it works; it stays paused for its first jobs.
    sleeps(&mut conn, "later", 2, 1);
    assert!(
        ok(&db, &["queue", "resume", "later"]).contains("resumed queue later"),
        "a paused queue is known"
    );
}

#[test]
fn the_command_line_sets_shows_and_refuses_key_limits() {
    let (db, mut conn) = TestDb::connected();
    sleeps(&mut conn, "orders", 1, 1);
    let keyed = |conn: &mut PgConnection, n: usize| {
        enqueue_all_with(
            conn,
            (0..n).map(|_| Sleep { ms: 1 }),
            &JobOptions::new()
                .queue("orders")
                .concurrency_key("customer:42"),
        );
    };
    let key_limit = |conn: &mut PgConnection| {
        jobqueue_core::list_queues(conn, Default::default())
            .expect("list")
            .into_iter()
            .find(|q| q.queue == "orders")
            .and_then(|q| q.key_limit)
    };

    let out = ok(&db, &["queue", "keys", "orders", "ordered"]);
    assert!(
        out.contains("queue orders: one job of a key at a time, in enqueue order"),
        "{out}"
    );
    keyed(&mut conn, 3);
    // The first one's enqueue admitted it; the others wait behind it.
    assert_eq!(count_where(&mut conn, "status = 'waiting'"), 2);
    let out = ok(&db, &["queue", "keys", "orders", "2"]);
    assert!(
        out.contains("queue orders: at most 2 jobs of one key at once"),
        "{out}"
    );
    // The first line is the header: its last columns are the key limit and
    // the keyed jobs.
    let listed = ok(&db, &["queue", "list"]);
    let header: Vec<&str> = listed
        .lines()
        .next()
        .expect("a header")
        .split_whitespace()
        .collect();
    assert_eq!(header[header.len() - 2..], ["keys", "keyed"], "{listed}");
    let line = listed_queue(&db, "orders").join(" ");
    assert!(
        line.ends_with("2 per key 1 held, 1 waiting"),
        "{line}\n{listed}"
    );
    assert_eq!(
        key_limit(&mut conn).map(|l| l.to_string()).as_deref(),
        Some("2 per key")
    );
    let waiting = ok(&db, &["list", "--status", "waiting", "--json"]);
    assert_eq!(waiting.lines().count(), 1, "{waiting}");
    assert!(waiting.contains("\"status\":\"waiting\""), "{waiting}");

    // Bad input is exit code 2 and says what to write; an unknown queue
    // names the known ones; nothing changed.
    for (limit, says) in [
        ("0", "0 jobs per key is not a limit: give 1 to 10000"),
        ("-1", "-1 jobs per key is not a limit: give 1 to 10000"),
        ("10001", "give 1 to 10000"),
        (
            "x",
            "`x` is not a whole number of jobs per key (e.g. 5), nor `ordered`",
        ),
    ] {
        let (code, _, err) = cli(&db, &["queue", "keys", "orders", limit]);
        assert_eq!(code, Some(2), "{limit}: {err}");
        assert!(err.contains(says), "{limit}: {err}");
    }
    // A queue nothing names yet takes a limit, as it takes a pause, and
    // is said to (a typo shows).
    let (code, out, err) = cli(&db, &["queue", "keys", "oders", "5"]);
    assert_eq!(code, Some(0), "{err}");
    assert!(
        out.contains("(no job names it yet: the setting waits for its first jobs)"),
        "{out}"
    );
    let (code, _, err) = cli(&db, &["queue", "keys", "orders"]);
    assert_eq!(code, Some(2), "{err}");
    assert_eq!(
        key_limit(&mut conn).map(|l| l.to_string()).as_deref(),
        Some("2 per key")
    );

    // Removed: the waiting job is admitted at once.
    let out = ok(&db, &["queue", "keys", "orders", "--none"]);
    assert!(out.contains("queue orders: no key limit"), "{out}");
    assert_eq!(key_limit(&mut conn), None);
    assert_eq!(count_where(&mut conn, "status = 'waiting'"), 0);
    let listed = listed_queue(&db, "orders");
    assert_eq!(listed[listed.len() - 2..], ["-", "-"], "{listed:?}");
}

/// An early claim names only the queues announced to it. A claim that names
/// a queue with a global limit locks that queue's row first; with the busy
/// queue's row locked (as another runner's claim of it would, for as long
/// as that claim takes), the quiet queue's job is still claimed and run.
#[test]
fn a_quiet_queues_early_claim_is_not_held_up_by_the_busy_queue() {
    let (db, mut conn) = TestDb::with_side_tables();
    ok(&db, &["queue", "limit", "bulk", "1000"]);
    sleeps(&mut conn, "bulk", 400, 20);
    let mut config = RunnerConfig::new(&db.url)
        .keep_completed(jobqueue_tests::KEEP_COMPLETED)
        .concurrency(2)
        .queues(["bulk", "quiet"]);
    config.poll_interval = Duration::from_millis(200);
    let runner = start_runner(config, Registry::new().register::<Sleep>());
    wait_for(
        "the runner busy with bulk jobs",
        Duration::from_secs(20),
        || held(&mut conn, "bulk") >= 2,
    );
    let mut locker = db.conn();
    locker
        .batch_execute("BEGIN; SELECT 1 FROM jobqueue_queues WHERE name = 'bulk' FOR NO KEY UPDATE")
        .expect("lock the busy queue's row");
    let quiet = Sleep { ms: 0 }
        .options()
        .queue("quiet")
        .enqueue(&mut conn)
        .expect("enqueue")
        .id();
    wait_for(
        "the quiet job done while the busy queue's row is locked",
        Duration::from_secs(20),
        || jobqueue_tests::is_completed(&mut conn, quiet),
    );
    locker.batch_execute("ROLLBACK").expect("unlock");
    runner.shutdown();
}
