//! Lifecycle handlers: a job that fails for good, or that a runner
//! cancels, is handed to them in the transaction that writes it, from the
//! completer and from the rescue of a lost runner's job; a handler's error
//! rolls back its own writes only; a handler's panic, and a handler past
//! its timeout, are told once; and under `kill -9` every dead letter is
//! recorded exactly once.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use diesel::PgConnection;
use jobqueue_core::{Job, JobId, JobRow, JobStatus};
use jobqueue_runner::{JobContext, JobError, Lifecycle, Perform, RunnerConfig};
use jobqueue_tests::fault::{Proc, kill_and_replace, runner_command, runner_flags, terminate_all};
use jobqueue_tests::jobs::{Cancellable, DeadLetters, Doomed, Noop, Panic, record_on, registry};
use jobqueue_tests::{
    TestDb, claim_one, count_where, effects_where, enqueue_all, exec, expire_leases, scalar,
    start_runner, wait_count, wait_for, wait_no_live_jobs, wait_status,
};
use serde::{Deserialize, Serialize};

const WORKER: &str = env!("CARGO_BIN_EXE_jobqueue-test-worker");

/// Writes a `refused` effect, then returns an error: its write is rolled
/// back, the job is failed all the same.
struct Refuses;

impl Lifecycle for Refuses {
    fn failed(&self, job: &JobRow, conn: &mut PgConnection) -> Result<(), String> {
        record_on(conn, job.id, job.attempts, "refused").map_err(|e| e.to_string())?;
        Err("the error tracker is down".into())
    }
}

/// Dead letters recorded more than once, or jobs failed without one.
fn dead_letters_off(conn: &mut PgConnection) -> (i64, i64) {
    let twice = scalar(
        conn,
        "SELECT count(*) AS n FROM (SELECT job_id FROM test_effects WHERE kind = 'dead'
         GROUP BY job_id HAVING count(*) > 1) AS twice",
    );
    let missing = count_where(
        conn,
        "status = 'failed' AND NOT EXISTS (SELECT 1 FROM test_effects e
         WHERE e.job_id = jobqueue_jobs.id AND e.kind = 'dead')",
    );
    (twice, missing)
}

#[test]
fn a_job_failed_for_good_is_handed_over_in_the_transaction_that_fails_it() {
    let (db, mut conn) = TestDb::with_side_tables();
    enqueue_all(&mut conn, (0..5).map(|_| Doomed { ms: 0 }));
    enqueue_all(&mut conn, (0..3).map(|n| Noop { n }));
    // Refuses first: its error rolls back its own write, not the failure,
    // nor what the handler after it writes.
    let registry = registry().lifecycle(Refuses).lifecycle(DeadLetters);
    let runner = start_runner(RunnerConfig::new(&db.url).concurrency(2), registry);
    wait_count(&mut conn, "status = 'failed'", 5);
    wait_for("the completions", Duration::from_secs(30), || {
        runner.stats().completed == 3
    });
    runner.shutdown();
    assert_eq!(effects_where(&mut conn, "kind = 'dead'"), 5);
    assert_eq!(effects_where(&mut conn, "kind = 'refused'"), 0);
    assert_eq!(dead_letters_off(&mut conn), (0, 0));
}

#[test]
fn a_lost_runners_last_attempt_is_handed_over_by_the_runner_that_rescues_it() {
    let (db, mut conn) = TestDb::with_side_tables();
    Doomed { ms: 0 }.enqueue(&mut conn).expect("enqueue");
    // Its one attempt claimed by a runner that is gone, its lease run out.
    claim_one(&mut conn, "gone");
    expire_leases(&mut conn);
    let mut config = RunnerConfig::new(&db.url);
    config.rescue_interval = Duration::from_millis(100);
    let runner = start_runner(config, registry().lifecycle(DeadLetters));
    wait_count(&mut conn, "status = 'failed'", 1);
    runner.shutdown();
    assert_eq!(
        count_where(&mut conn, "errors::text LIKE '%worker lost%'"),
        1,
        "failed by the rescue"
    );
    assert_eq!(effects_where(&mut conn, "kind = 'dead'"), 1);
}

/// Each panic it is told of: the job and the message.
#[derive(Default, Clone)]
struct Panics(Arc<Mutex<Vec<(jobqueue_core::JobId, String)>>>);

impl Lifecycle for Panics {
    fn panicked(&self, job: &JobRow, message: &str) {
        self.0
            .lock()
            .expect("panics")
            .push((job.id, message.to_owned()));
    }
}

#[test]
fn a_handlers_panic_is_told_once_by_the_runner_that_caught_it() {
    let (db, mut conn) = TestDb::with_side_tables();
    let id = Panic {}.enqueue(&mut conn).expect("enqueue").id();
    let panics = Panics::default();
    let runner = start_runner(
        RunnerConfig::new(&db.url),
        registry().lifecycle(panics.clone()),
    );
    wait_for("the panic to be told", Duration::from_secs(30), || {
        !panics.0.lock().expect("panics").is_empty()
    });
    let summary = runner.shutdown();
    let told = panics.0.lock().expect("panics").clone();
    // One attempt, one panic, one call (a retry may have come after).
    assert_eq!(told.len() as u64, summary.stats.panicked, "{told:?}");
    assert_eq!(told[0].0, id);
    assert!(told[0].1.contains("panicked"), "{told:?}");
}

#[test]
fn under_kill_9_every_dead_letter_is_recorded_exactly_once() {
    const JOBS: usize = 600;
    let (db, mut conn) = TestDb::with_side_tables();
    enqueue_all(&mut conn, (0..JOBS).map(|_| Doomed { ms: 40 }));
    let mut started = 0;
    let mut start = || {
        started += 1;
        let mut command = runner_command(
            WORKER,
            &db.url,
            &format!("doomed-{started}"),
            &runner_flags(&[("lease-secs", "2")]),
        );
        command.env("JOBQUEUE_TEST_DEAD_LETTERS", "1");
        Proc::spawn(&format!("doomed-{started}"), command)
    };
    let mut live: Vec<Proc> = (0..2).map(|_| start()).collect();
    wait_for("the first dead letter", Duration::from_secs(60), || {
        count_where(&mut conn, "status = 'failed'") > 0
    });
    let kills = kill_and_replace(&mut live, &mut start, Duration::from_secs(6), || {
        count_where(&mut conn, "status <> 'failed'") > 0
    });
    wait_no_live_jobs(&mut conn, Duration::from_secs(120));
    terminate_all(&mut live);
    let rescued = count_where(&mut conn, "errors::text LIKE '%worker lost%'");
    assert_eq!(count_where(&mut conn, "status = 'failed'"), JOBS as i64);
    assert!(kills > 0);
    // The kills hit attempts under way: their jobs were failed by the
    // rescue, in the transaction of another runner.
    assert!(
        rescued > 0,
        "no kill hit an attempt under way ({kills} kills)"
    );
    eprintln!(
        "dead letters under kill -9: {JOBS} jobs, {kills} kills, {rescued} failed by a rescue"
    );
    assert_eq!(
        dead_letters_off(&mut conn),
        (0, 0),
        "(recorded twice, never recorded) after {kills} kills, {rescued} failed by a rescue"
    );
}

/// Records each cancellation as a `cancelled` effect, in the transaction
/// that cancels the job.
struct Cancellations;

impl Lifecycle for Cancellations {
    fn cancelled(&self, job: &JobRow, conn: &mut PgConnection) -> Result<(), String> {
        record_on(conn, job.id, job.attempts, "cancelled").map_err(|e| e.to_string())
    }
}

#[test]
fn a_job_a_runner_cancels_is_handed_over_in_the_transaction_that_cancels_it() {
    let (db, mut conn) = TestDb::with_side_tables();
    // One whose runner was lost with a cancel request pending...
    let lost = Doomed { ms: 0 }.enqueue(&mut conn).expect("enqueue").id();
    assert_eq!(claim_one(&mut conn, "gone").job_id, lost);
    exec(
        &mut conn,
        &format!("UPDATE jobqueue_jobs SET cancel_requested = true WHERE id = '{lost}'"),
    );
    expire_leases(&mut conn);
    // ...and one the runner's handler stops on a cancel request.
    let running = Cancellable {}.enqueue(&mut conn).expect("enqueue").id();
    let mut config = RunnerConfig::new(&db.url);
    config.rescue_interval = Duration::from_millis(100);
    config.heartbeat_interval = Some(Duration::from_millis(100));
    let runner = start_runner(config, registry().lifecycle(Cancellations));
    wait_status(&mut conn, lost, JobStatus::Cancelled);
    wait_for("the handler to start", Duration::from_secs(30), || {
        effects_where(
            &mut conn,
            &format!("job_id = '{running}' AND kind = 'start'"),
        ) == 1
    });
    jobqueue_core::cancel(&mut conn, running).expect("cancel");
    wait_status(&mut conn, running, JobStatus::Cancelled);
    runner.shutdown();
    for id in [running, lost] {
        assert_eq!(
            effects_where(
                &mut conn,
                &format!("job_id = '{id}' AND kind = 'cancelled'")
            ),
            1,
            "{id}"
        );
    }
}

/// Runs until it is past its timeout (200 ms), then gives up.
#[derive(Serialize, Deserialize, Job)]
#[job(type = "lifecycle.overrun")]
struct Overrun {}

impl Perform for Overrun {
    const TIMEOUT: Option<Duration> = Some(Duration::from_millis(200));

    fn perform(&self, ctx: &mut JobContext<'_>) -> Result<(), JobError> {
        while !ctx.is_timed_out() {
            std::thread::sleep(Duration::from_millis(10));
        }
        Err(JobError::fail("ran out of time"))
    }
}

/// The jobs it is told ran past their timeout.
#[derive(Default, Clone)]
struct Overruns(Arc<Mutex<Vec<(JobId, String)>>>);

impl Lifecycle for Overruns {
    fn timed_out(&self, job_id: JobId, job_type: &str) {
        self.0
            .lock()
            .expect("overruns")
            .push((job_id, job_type.to_owned()));
    }
}

#[test]
fn a_handler_past_its_timeout_is_told_once() {
    let (db, mut conn) = TestDb::connected();
    let id = Overrun {}.enqueue(&mut conn).expect("enqueue").id();
    let overruns = Overruns::default();
    let mut config = RunnerConfig::new(&db.url);
    config.heartbeat_interval = Some(Duration::from_millis(50));
    let runner = start_runner(
        config,
        registry().register::<Overrun>().lifecycle(overruns.clone()),
    );
    wait_status(&mut conn, id, JobStatus::Failed);
    runner.shutdown();
    assert_eq!(
        *overruns.0.lock().expect("overruns"),
        [(id, "lifecycle.overrun".to_owned())]
    );
}

#[test]
fn the_testing_kit_tells_the_lifecycle_handlers_as_a_runner_does() {
    let (_db, mut conn) = TestDb::with_side_tables();
    let doomed = Doomed { ms: 0 }.enqueue(&mut conn).expect("enqueue").id();
    let panics = Panics::default();
    let registry = registry().lifecycle(DeadLetters).lifecycle(panics.clone());
    // Panic's first attempt of two: retried later, not dead.
    let panicking = Panic {}.enqueue(&mut conn).expect("enqueue").id();
    jobqueue_testing::Drain::new(&registry)
        .run(&mut conn)
        .expect("drain");
    assert_eq!(
        effects_where(&mut conn, &format!("job_id = '{doomed}' AND kind = 'dead'")),
        1
    );
    assert_eq!(effects_where(&mut conn, "kind = 'dead'"), 1);
    let told = panics.0.lock().expect("panics").clone();
    assert_eq!(told.len(), 1, "{told:?}");
    assert_eq!(told[0].0, panicking);
}
