//! The registry of live runners: each runner process registers itself,
//! stays seen while it runs, shows as gone once killed, and leaves when it
//! stops; `stats` says which pending types no live runner handles.

use std::time::Duration;

use jobqueue_core::{Job, JobOptions};
use jobqueue_runner::{Registry, RunnerConfig};
use jobqueue_tests::fault::{Proc, runner_flags};
use jobqueue_tests::jobs::{Noop, StepJob, create_side_tables};
use jobqueue_tests::{TestDb, WAIT_LIMIT, put, run_cli, scalar, start_runner, wait_for};

const WORKER: &str = env!("CARGO_BIN_EXE_jobqueue-test-worker");

fn listed(db: &TestDb) -> String {
    let (code, out, err) = run_cli(WORKER, &db.url, &["runners"]);
    assert_eq!(code, Some(0), "{err}");
    out
}

/// The `runners` line of `name`, split into its columns.
fn line(db: &TestDb, name: &str) -> Option<Vec<String>> {
    listed(db)
        .lines()
        .find(|line| line.starts_with(name))
        .map(|line| line.split_whitespace().map(str::to_owned).collect())
}

/// The state column (`live` or `gone`) of `name`'s line.
fn state(db: &TestDb, name: &str) -> Option<String> {
    line(db, name)?
        .into_iter()
        .find(|column| column == "live" || column == "gone")
}

#[test]
fn runners_register_stay_seen_show_as_gone_when_killed_and_leave_when_stopped() {
    let db = TestDb::new();
    let flags = runner_flags(&[("lease-secs", "1.5"), ("queues", "mail,media")]);
    let killed = Proc::runner(WORKER, &db.url, "registry-killed", &flags);
    let mut stopped = Proc::runner(WORKER, &db.url, "registry-stopped", &flags);
    wait_for("both registered", Duration::from_secs(20), || {
        line(&db, "registry-killed").is_some() && line(&db, "registry-stopped").is_some()
    });
    let columns = line(&db, "registry-killed").expect("listed");
    assert_eq!(columns[2], killed.pid().to_string(), "{columns:?}");
    assert_eq!(columns[3], jobqueue_runner::VERSION);
    assert_eq!(columns[4], "4", "workers");
    assert_eq!(columns[5], "mail,media");
    assert_eq!(state(&db, "registry-killed").as_deref(), Some("live"));
    assert!(
        columns
            .last()
            .is_some_and(|types| types.contains("test.noop")),
        "{columns:?}"
    );

    // Three leases after it last beat, a killed runner is gone (its row is
    // kept, for `doctor` and `stats` to explain its held jobs).
    killed.signal("KILL");
    wait_for(
        "the killed runner shown as gone",
        Duration::from_secs(30),
        || state(&db, "registry-killed").as_deref() == Some("gone"),
    );
    // The other, started with it, stays seen: it beats every third of a
    // lease (without that, it would have gone silent as long).
    assert_eq!(state(&db, "registry-stopped").as_deref(), Some("live"));

    // Pending jobs of a type no live runner handles are said so.
    let mut conn = db.conn();
    put(
        &mut conn,
        "nobody.handles.this",
        JobOptions::new().queue("mail"),
    );
    put(&mut conn, "test.noop", JobOptions::new().queue("elsewhere"));
    let (_, stats, _) = run_cli(WORKER, &db.url, &["stats"]);
    let of = |job_type: &str| {
        stats
            .lines()
            .find(|line| line.starts_with(job_type))
            .unwrap_or_else(|| panic!("{stats}"))
            .to_owned()
    };
    assert!(of("nobody.handles.this").ends_with("(no live runner handles this type)"));
    assert!(!of("test.noop").contains("no live runner"), "{stats}");

    stopped.terminate(Duration::from_secs(20));
    assert!(
        line(&db, "registry-stopped").is_none(),
        "a stopped runner leaves"
    );
}

/// A runner of 2 workers named `name`, which reads the registry and
/// rescues every 200 ms.
fn named(db: &TestDb, name: &str) -> RunnerConfig {
    let mut config = RunnerConfig::new(&db.url).concurrency(2);
    config.worker_id = name.to_owned();
    config.poll_interval = Duration::from_millis(200);
    config.rescue_interval = Duration::from_millis(200);
    config
}

/// A no-op and a step job for each of `ns`.
fn enqueue_both(conn: &mut diesel::PgConnection, ns: std::ops::Range<u64>) {
    for n in ns {
        Noop { n }.enqueue(conn).expect("enqueue");
        StepJob {
            n: n as i64,
            ms: 0,
            fail: false,
        }
        .enqueue(conn)
        .expect("enqueue");
    }
}

/// A runner that left a type to the other runner of its queue, which
/// handled it, sets that type's jobs aside once the other is gone. Its
/// claims skip the types it read as handled elsewhere
/// (`RUNNER_TYPES_ELSEWHERE`, refreshed every two poll intervals): here it
/// reads them while the other runs, the other stops, and jobs of that type
/// come. They wait no longer than the next read, then are set aside
/// (`unhandled`, for whichever runner handles them next), none claimed,
/// none lost.
#[test]
fn a_type_left_to_a_runner_that_stopped_is_set_aside_after_the_next_read() {
    let db = TestDb::new();
    let mut conn = db.conn();
    create_side_tables(&mut conn);
    let count = |conn: &mut diesel::PgConnection, query: &str| scalar(conn, query);
    let steps = start_runner(named(&db, "steps"), Registry::new().register::<StepJob>());
    let noops = start_runner(named(&db, "noops"), Registry::new().register::<Noop>());
    wait_for("both runners registered", WAIT_LIMIT, || {
        count(&mut conn, "SELECT count(*) AS n FROM jobqueue_runners") == 2
    });
    // Jobs of both types, each worked by its own runner: the runner of
    // no-ops claims beside a live runner of steps, and leaves steps alone.
    enqueue_both(&mut conn, 0..20);
    wait_for("both runners' jobs done", WAIT_LIMIT, || {
        noops.stats().completed == 20 && steps.stats().completed == 20
    });
    assert_eq!(
        noops.stats().unhandled,
        0,
        "steps were left to their runner"
    );
    steps.shutdown();
    wait_for(
        "the runner of steps gone from the registry",
        WAIT_LIMIT,
        || count(&mut conn, "SELECT count(*) AS n FROM jobqueue_runners") == 1,
    );
    for n in 100..120 {
        StepJob {
            n,
            ms: 0,
            fail: false,
        }
        .enqueue(&mut conn)
        .expect("enqueue");
    }
    wait_for("the new steps set aside", WAIT_LIMIT, || {
        count(
            &mut conn,
            "SELECT count(*) AS n FROM jobqueue_jobs WHERE status = 'unhandled'",
        ) == 20
    });
    let claimed = count(
        &mut conn,
        "SELECT count(*) AS n FROM jobqueue_jobs WHERE job_type = 'test.step' AND attempts > 0 \
         AND status <> 'completed'",
    );
    noops.shutdown();
    assert_eq!(
        claimed, 0,
        "no step was claimed by the runner without its handler"
    );
}

/// Two runners of one queue with different handlers (a rolling deploy that
/// adds a type): each leaves the other's jobs to it instead of setting
/// them aside. A runner that started before the other knows of it by its
/// next read of the registry, or at once after a claim set jobs aside: at
/// most a claim's worth is set aside, never a job twice. Before, the
/// runner without a handler set aside every job of the other type it met
/// (`unhandled`), the other took them back every rescue interval, and the
/// first set them aside again.
#[test]
fn runners_with_different_handlers_on_one_queue_leave_each_other_their_jobs() {
    let db = TestDb::new();
    let mut conn = db.conn();
    create_side_tables(&mut conn);
    let registered = |conn: &mut diesel::PgConnection, name: &str| {
        scalar(
            conn,
            &format!("SELECT count(*) AS n FROM jobqueue_runners WHERE worker_id = '{name}'"),
        ) == 1
    };
    let steps = start_runner(named(&db, "steps"), Registry::new().register::<StepJob>());
    wait_for("the first runner registered", WAIT_LIMIT, || {
        registered(&mut conn, "steps")
    });
    let noops = start_runner(named(&db, "noops"), Registry::new().register::<Noop>());
    wait_for("the second runner registered", WAIT_LIMIT, || {
        registered(&mut conn, "noops")
    });
    enqueue_both(&mut conn, 0..200);
    wait_for("every job done", WAIT_LIMIT, || {
        noops.stats().completed + steps.stats().completed == 400
    });
    let set_aside = (noops.stats().unhandled, steps.stats().unhandled);
    noops.shutdown();
    steps.shutdown();
    // A claim of a runner of 2 workers takes at most a few jobs (its
    // fetcher's and its early claims' one each).
    assert!(
        set_aside.0 <= 8 && set_aside.1 <= 8,
        "jobs set aside by each runner: {set_aside:?}"
    );
}
