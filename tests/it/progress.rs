//! A handler's progress reports are notes in memory that the runner writes
//! with the job's next heartbeat, or with its outcome: thousands of reports
//! cost no statement each, reach the row by the next heartbeat, end up on
//! the row of a finished job, and a database outage does not reach them.

use std::sync::{Arc, Condvar, Mutex, PoisonError};
use std::time::Duration;

use diesel::connection::SimpleConnection;
use diesel::prelude::*;
use jobqueue_core::{Job, JobId, JobRow, JobStatus};
use jobqueue_runner::{JobContext, JobError, Perform, Registry, RunnerConfig, RunnerHandle};
use jobqueue_tests::fault::OwnCluster;
use jobqueue_tests::{
    KEEP_COMPLETED, TestDb, WAIT_LIMIT, read_job, scalar, start_runner, wait_for, wait_status,
};
use jobqueue_tools::postgres::StopMode;
use serde::{Deserialize, Serialize};

/// Where the handler is, as the test and the handler tell each other.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Step {
    Started,
    /// The first round of reports is made; the handler waits for `Go`.
    Reported,
    Go,
    /// The handler made every report and returns.
    Returned,
    /// A report failed with this error.
    Failed(String),
}

#[derive(Debug)]
struct Gate {
    step: Mutex<Step>,
    changed: Condvar,
}

impl Gate {
    fn new() -> Arc<Self> {
        Arc::new(Gate {
            step: Mutex::new(Step::Started),
            changed: Condvar::new(),
        })
    }

    fn set(&self, step: Step) {
        *self.step.lock().unwrap_or_else(PoisonError::into_inner) = step;
        self.changed.notify_all();
    }

    /// Waits (up to the harness's limit) until `done` holds for the step;
    /// returns the step then.
    fn wait_until(&self, done: impl Fn(&Step) -> bool) -> Step {
        let step = self.step.lock().unwrap_or_else(PoisonError::into_inner);
        let (step, _) = self
            .changed
            .wait_timeout_while(step, WAIT_LIMIT, |step| !done(step))
            .unwrap_or_else(PoisonError::into_inner);
        step.clone()
    }
}

/// Reports progress and an event `reports` times; with `wait`, then tells
/// the test and waits for its go before `reports` more. Then reports the
/// stage `last` at 90 % and succeeds, or with `fail`, fails for good.
#[derive(Serialize, Deserialize, Job)]
#[job(type = "test.progress.report")]
struct Report {
    reports: u32,
    wait: bool,
    fail: bool,
}

impl Perform for Report {
    fn perform(&self, ctx: &mut JobContext<'_>) -> Result<(), JobError> {
        let gate = ctx.state::<Arc<Gate>>()?;
        let report = |ctx: &mut JobContext<'_>, percent: u8, stage: &str| {
            let reported = ctx.progress(percent, stage).and_then(|()| ctx.events(1));
            if let Err(e) = &reported {
                gate.set(Step::Failed(e.to_string()));
            }
            reported
        };
        for i in 0..self.reports {
            report(ctx, (i % 90) as u8, &format!("before {i}"))?;
        }
        if self.wait {
            gate.set(Step::Reported);
            gate.wait_until(|step| *step == Step::Go);
            for i in 0..self.reports {
                report(ctx, (i % 90) as u8, &format!("after {i}"))?;
            }
        }
        ctx.progress(90, "last")?;
        gate.set(Step::Returned);
        if self.fail {
            Err(JobError::fail("gave up at the last stage"))
        } else {
            Ok(())
        }
    }
}

/// A runner of `Report` on `url` that keeps completed rows, beating every
/// `heartbeat`.
fn runner(url: &str, heartbeat: Duration, gate: &Arc<Gate>) -> RunnerHandle {
    let config = RunnerConfig::new(url)
        .keep_completed(KEEP_COMPLETED)
        .concurrency(2)
        .lease(Duration::from_secs(60))
        .heartbeat_interval(heartbeat)
        .poll_interval(Duration::from_millis(50));
    start_runner(
        config,
        Registry::new().state(Arc::clone(gate)).register::<Report>(),
    )
}

fn stage_and_events(row: &JobRow) -> (Option<&str>, i32) {
    (row.current_stage.as_deref(), row.events_count)
}

/// Counts, in table `progress_writes`, the writes of a job row that change
/// its progress, stage or event count.
fn count_progress_writes(conn: &mut PgConnection) {
    conn.batch_execute(
        "CREATE TABLE progress_writes (n int8 NOT NULL);
         INSERT INTO progress_writes VALUES (0);
         CREATE FUNCTION count_progress_write() RETURNS trigger LANGUAGE plpgsql AS $$
         BEGIN
             UPDATE progress_writes SET n = n + 1;
             RETURN NEW;
         END $$;
         CREATE TRIGGER count_progress_write AFTER UPDATE ON jobqueue_jobs FOR EACH ROW
         WHEN (OLD.progress IS DISTINCT FROM NEW.progress
               OR OLD.current_stage IS DISTINCT FROM NEW.current_stage
               OR OLD.events_count IS DISTINCT FROM NEW.events_count)
         EXECUTE FUNCTION count_progress_write();",
    )
    .expect("count the progress writes");
}

fn progress_writes(conn: &mut PgConnection) -> i64 {
    scalar(conn, "SELECT n FROM progress_writes")
}

/// Enqueues a `Report` of `reports` that waits for the test's go; returns
/// once its handler made them and waits, and a heartbeat wrote them to the
/// job's row.
fn reported_and_waiting(conn: &mut PgConnection, gate: &Gate, reports: u32) -> JobId {
    let id = Report {
        reports,
        wait: true,
        fail: false,
    }
    .enqueue(conn)
    .expect("enqueue")
    .id();
    assert_eq!(
        gate.wait_until(|step| *step != Step::Started),
        Step::Reported
    );
    let last = format!("before {}", reports - 1);
    wait_for(
        "the reports on the row while the handler waits",
        WAIT_LIMIT,
        || {
            stage_and_events(&read_job(conn, id))
                == (Some(last.as_str()), i32::try_from(reports).expect("small"))
        },
    );
    id
}

#[test]
fn ten_thousand_reports_reach_the_row_by_the_next_heartbeat_in_a_few_writes() {
    let (db, mut conn) = TestDb::connected();
    count_progress_writes(&mut conn);
    let gate = Gate::new();
    // The heartbeat is short, the handler's wait is not: its reports can
    // reach the row only through a heartbeat.
    let runner = runner(&db.url, Duration::from_millis(100), &gate);
    let id = reported_and_waiting(&mut conn, &gate, 10_000);
    let row = read_job(&mut conn, id);
    assert_eq!((row.status, row.progress), (JobStatus::Running, 9999 % 90));
    // A statement per report would be 20,000 writes (a progress and an
    // event each); the heartbeats wrote a few.
    let writes = progress_writes(&mut conn);
    assert!(writes < 100, "10,000 reports took {writes} writes");

    gate.set(Step::Go);
    assert_eq!(gate.wait_until(|step| *step != Step::Go), Step::Returned);
    wait_status(&mut conn, id, JobStatus::Completed);
    runner.shutdown();
    let row = read_job(&mut conn, id);
    assert_eq!(stage_and_events(&row), (Some("last"), 20_000));
    assert_eq!((row.progress, row.attempts), (100, 1));
    let writes = progress_writes(&mut conn);
    assert!(writes < 200, "20,000 reports took {writes} writes");
}

#[test]
fn the_last_report_is_written_with_the_outcome() {
    let (db, mut conn) = TestDb::connected();
    let gate = Gate::new();
    // No heartbeat comes before the jobs end: their outcomes carry the
    // reports.
    let runner = runner(&db.url, Duration::from_secs(50), &gate);
    let job = |fail| Report {
        reports: 3,
        wait: false,
        fail,
    };
    let completed = job(false).enqueue(&mut conn).expect("enqueue").id();
    let failed = job(true).enqueue(&mut conn).expect("enqueue").id();
    wait_status(&mut conn, completed, JobStatus::Completed);
    wait_status(&mut conn, failed, JobStatus::Failed);
    runner.shutdown();
    let row = read_job(&mut conn, completed);
    assert_eq!(
        (stage_and_events(&row), row.progress),
        ((Some("last"), 3), 100)
    );
    // A failed attempt shows where it stopped.
    let row = read_job(&mut conn, failed);
    assert_eq!(
        (stage_and_events(&row), row.progress),
        ((Some("last"), 3), 90)
    );
    assert_eq!(row.last_error.as_deref(), Some("gave up at the last stage"));
}

#[test]
fn a_report_while_the_database_is_down_does_not_fail_the_attempt() {
    let own = OwnCluster::start();
    let mut conn = own.conn();
    let gate = Gate::new();
    let runner = runner(&own.url, Duration::from_millis(100), &gate);
    let id = reported_and_waiting(&mut conn, &gate, 1000);
    // The database goes away while the handler reports.
    drop(conn);
    own.cluster().stop(StopMode::Fast).expect("stop the server");
    gate.set(Step::Go);
    assert_eq!(
        gate.wait_until(|step| *step != Step::Go),
        Step::Returned,
        "every report made while the database was down succeeded"
    );
    own.cluster().start().expect("start the server again");

    // The attempt completes: its reports and its completion are written
    // once the database is back.
    let mut conn = own.conn();
    wait_status(&mut conn, id, JobStatus::Completed);
    runner.shutdown();
    let row = read_job(&mut conn, id);
    assert_eq!(stage_and_events(&row), (Some("last"), 2000));
    assert_eq!((row.attempts, row.last_error), (1, None));
}

/// A beat's events are all the events of the claim so far, with the count
/// at claim: a beat sent again (its first commit's reply lost), or an
/// older beat committed after a newer one, counts no event twice; a beat
/// without a base adds its events, as a caller of the engine sends them.
#[test]
fn a_beat_sent_again_counts_its_events_once() {
    use jobqueue_core::engine::{Beat, Progress, heartbeat_with_progress};
    let db = TestDb::new();
    let mut conn = db.conn();
    jobqueue_tests::jobs::Noop { n: 1 }
        .enqueue(&mut conn)
        .expect("enqueue");
    let lease = jobqueue_tests::claim_one(&mut conn, "w");
    let beat = |events: i32, events_base: Option<i32>| Beat {
        lease,
        progress: Some(Progress {
            events,
            ..Progress::default()
        }),
        events_base,
    };
    let lease_time = Duration::from_secs(30);
    let events = |conn: &mut PgConnection| read_job(conn, lease.job_id).events_count;
    heartbeat_with_progress(&mut conn, &[beat(3, Some(0))], lease_time).expect("beat");
    heartbeat_with_progress(&mut conn, &[beat(3, Some(0))], lease_time).expect("sent again");
    assert_eq!(events(&mut conn), 3);
    heartbeat_with_progress(&mut conn, &[beat(5, Some(0))], lease_time).expect("beat");
    heartbeat_with_progress(&mut conn, &[beat(3, Some(0))], lease_time).expect("an older one");
    assert_eq!(events(&mut conn), 5);
    heartbeat_with_progress(&mut conn, &[beat(2, None)], lease_time).expect("added");
    assert_eq!(events(&mut conn), 7);
}
