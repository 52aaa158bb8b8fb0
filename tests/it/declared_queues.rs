//! Queues declared in code (`Registry::queue`): applied at a runner's
//! start; an operator's change stands until the code declares another
//! value; two starts at once apply a changed declaration once.

use std::time::Duration;

use diesel::prelude::*;
use jobqueue_core::Job;
use jobqueue_core::{
    Counting, KeyLimit, QueueConfig, declare_queue, list_queues, resume_queue, set_queue_limit,
};
use jobqueue_runner::RunnerConfig;
use jobqueue_tests::jobs::{Noop, Sleep, registry};
use jobqueue_tests::{TestDb, scalar, start_runner, wait_count};

fn queue(conn: &mut PgConnection, name: &str) -> jobqueue_core::QueueInfo {
    list_queues(conn, Counting::Live)
        .expect("list")
        .into_iter()
        .find(|q| q.queue == name)
        .unwrap_or_else(|| panic!("queue {name} listed"))
}

fn ledger(limit: u32) -> QueueConfig {
    QueueConfig::new("ledger")
        .keys(KeyLimit::ordered())
        .limit(jobqueue_core::GlobalLimit::new(limit).expect("a limit"))
        .paused(true)
}

fn runner_with(db: &TestDb, declared: QueueConfig) -> jobqueue_runner::RunnerHandle {
    start_runner(
        RunnerConfig::new(&db.url)
            .poll_interval(Duration::from_millis(100))
            .keep_completed(Duration::from_secs(3600)),
        registry().queue(declared),
    )
}

#[test]
fn a_declared_queue_is_set_at_start_and_an_operators_change_stands_until_the_code_changes() {
    let (db, mut conn) = TestDb::with_side_tables();
    // Applied by the time the runner has started, before any claim.
    let runner = runner_with(&db, ledger(3));
    let q = queue(&mut conn, "ledger");
    assert!(q.paused);
    assert_eq!(q.global_limit, Some(3));
    assert_eq!(q.key_limit, Some(KeyLimit::ordered()));
    assert!(q.overrides().is_empty(), "{:?}", q.overrides());
    runner.shutdown();

    // An operator resumes it and raises its limit: a restart with the
    // same code leaves both, and the list says they differ from the code.
    resume_queue(&mut conn, "ledger").expect("resume");
    set_queue_limit(
        &mut conn,
        "ledger",
        Some(jobqueue_core::GlobalLimit::new(5).expect("a limit")),
    )
    .expect("limit");
    let runner = runner_with(&db, ledger(3));
    let q = queue(&mut conn, "ledger");
    assert!(!q.paused, "the operator's resume stands");
    assert_eq!(q.global_limit, Some(5), "the operator's limit stands");
    let overrides: Vec<(&str, String, String)> = q
        .overrides()
        .into_iter()
        .map(|o| (o.setting, o.now, o.declared))
        .collect();
    assert_eq!(
        overrides,
        [
            ("limit", "5".to_owned(), "3".to_owned()),
            ("paused", "working".to_owned(), "paused".to_owned())
        ]
    );
    // The command line shows it too.
    let list = std::process::Command::new(env!("CARGO_BIN_EXE_jobqueue-test-worker"))
        .args(["--database-url", &db.url, "queue", "list"])
        .output()
        .expect("queue list");
    let list = String::from_utf8_lossy(&list.stdout);
    assert!(
        list.contains(
            "ledger: limit is 5, the code declares 3 (set at run time; stands until the code declares another)"
        ) && list.contains("ledger: paused is working, the code declares paused"),
        "{list}"
    );
    // Keyed jobs of the declared ordered queue run.
    let jobs: Vec<Noop> = (0..3).map(|n| Noop { n }).collect();
    conn.transaction::<_, jobqueue_core::Error, _>(|conn| {
        for job in &jobs {
            job.options()
                .queue("ledger")
                .concurrency_key("acct:1")
                .enqueue(conn)?;
        }
        Ok(())
    })
    .expect("enqueue");
    wait_count(&mut conn, "status = 'completed'", 3);
    runner.shutdown();

    // A deploy whose code declares another limit: the new limit is
    // applied; the pause, declared as before, stays the operator's.
    let runner = runner_with(&db, ledger(4));
    let q = queue(&mut conn, "ledger");
    assert_eq!(q.global_limit, Some(4));
    assert!(!q.paused);
    runner.shutdown();
}

#[test]
fn two_starts_at_once_apply_a_changed_declaration_once() {
    let db = TestDb::new();
    let mut first = db.conn();
    let mut second = db.conn();
    declare_queue(
        &mut first,
        &QueueConfig::new("mail").limit(jobqueue_core::GlobalLimit::new(2).expect("a limit")),
    )
    .expect("declare");
    // The first start's transaction holds the queue's row while it applies
    // the new limit; the second, with the same code, waits for it.
    let (applied, waiting) = first
        .transaction::<_, jobqueue_core::Error, _>(|first| {
            let applied = declare_queue(
                first,
                &QueueConfig::new("mail")
                    .limit(jobqueue_core::GlobalLimit::new(6).expect("a limit")),
            )?
            .applied;
            let waiting = std::thread::spawn(move || {
                declare_queue(
                    &mut second,
                    &QueueConfig::new("mail")
                        .limit(jobqueue_core::GlobalLimit::new(6).expect("a limit")),
                )
                .expect("declare")
                .applied
            });
            jobqueue_tests::wait_for(
                "the second start to wait for the row",
                Duration::from_secs(10),
                || {
                    let mut probe = db.conn();
                    scalar(
                        &mut probe,
                        "SELECT count(*) AS n FROM pg_stat_activity \
                         WHERE wait_event_type = 'Lock' AND query LIKE '%jobqueue_queues%'",
                    ) == 1
                },
            );
            Ok((applied, waiting))
        })
        .expect("first start");
    // Committed: the second finds the declaration it would have made.
    assert_eq!(applied, ["limit"]);
    assert!(waiting.join().expect("second start").is_empty());
    let mut conn = db.conn();
    assert_eq!(queue(&mut conn, "mail").global_limit, Some(6));
}

#[test]
fn declared_workers_cap_a_queue_on_a_runner_with_more() {
    let (db, mut conn) = TestDb::with_side_tables();
    let jobs: Vec<Sleep> = (0..4).map(|_| Sleep { ms: 150 }).collect();
    conn.transaction::<_, jobqueue_core::Error, _>(|conn| {
        for job in &jobs {
            job.options().queue("media").enqueue(conn)?;
        }
        Ok(())
    })
    .expect("enqueue");
    let runner = start_runner(
        RunnerConfig::new(&db.url)
            .concurrency(4)
            .poll_interval(Duration::from_millis(50))
            .keep_completed(Duration::from_secs(3600)),
        registry().queue(QueueConfig::new("media").workers(1)),
    );
    wait_count(&mut conn, "status = 'completed'", 4);
    runner.shutdown();
    // At no job's start was another of them running.
    let overlapping = scalar(
        &mut conn,
        "SELECT count(*) AS n FROM test_effects AS s
         JOIN test_effects AS o_start ON o_start.kind = 'start' AND o_start.job_id <> s.job_id
         JOIN test_effects AS o_done ON o_done.kind = 'done' AND o_done.job_id = o_start.job_id
         WHERE s.kind = 'start' AND o_start.at <= s.at AND o_done.at > s.at",
    );
    assert_eq!(overlapping, 0, "one at a time");
}

#[test]
fn a_bad_declaration_refuses_the_start() {
    let db = TestDb::new();
    let start = jobqueue_runner::Runner::new(
        RunnerConfig::new(&db.url),
        registry()
            .queue(QueueConfig::new("mail").workers(0))
            .queue(QueueConfig::new("ok")),
    )
    .start();
    let error = start.err().map(|e| e.to_string()).unwrap_or_default();
    assert!(error.contains("0 workers for queue `mail`"), "{error}");
    let twice = jobqueue_runner::Runner::new(
        RunnerConfig::new(&db.url),
        registry()
            .queue(QueueConfig::new("mail"))
            .queue(QueueConfig::new("mail")),
    )
    .start();
    let error = twice.err().map(|e| e.to_string()).unwrap_or_default();
    assert!(error.contains("queue `mail` is declared twice"), "{error}");
}

#[test]
fn migrate_applies_the_queues_its_binary_declares() {
    let db = TestDb::unmigrated();
    let migrate = || {
        std::process::Command::new(env!("CARGO_BIN_EXE_jobqueue-test-worker"))
            .env("JOBQUEUE_TEST_ORDERED", "ledger")
            .args(["--database-url", &db.url, "migrate"])
            .output()
            .expect("migrate")
    };
    let first = migrate();
    assert!(first.status.success(), "{first:?}");
    let out = String::from_utf8_lossy(&first.stdout);
    assert!(
        out.contains("queues as declared: applied ledger: keys"),
        "{out}"
    );
    let mut conn = db.conn();
    assert_eq!(
        queue(&mut conn, "ledger").key_limit,
        Some(KeyLimit::ordered()),
        "ordered before any runner started"
    );
    let again = migrate();
    let out = String::from_utf8_lossy(&again.stdout);
    assert!(out.contains("queues as declared: 1 unchanged"), "{out}");
}
