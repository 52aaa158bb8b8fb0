//! Wake-ups are debounced per database: an enqueue that notified in one
//! database, in a transaction that rolled back, never holds back the
//! notification of an enqueue into another database.

use std::time::Duration;

use diesel::{Connection, RunQueryDsl};
use jobqueue_core::{Error, Job};
use jobqueue_runner::{Runner, RunnerConfig};
use jobqueue_tests::{TestDb, time_to_complete, wait_for};
use jobqueue_tools::bench::{BenchNoop, registry};

#[test]
fn a_rolled_back_notification_in_one_database_holds_back_no_other() {
    let (a, b) = (TestDb::new(), TestDb::new());
    let (mut conn_a, mut conn_b) = (a.conn(), b.conn());
    // Each connection has notified once, so the debounce knows its database;
    // the job is gone again before the runner starts.
    for conn in [&mut conn_a, &mut conn_b] {
        BenchNoop { seq: 0 }.enqueue(conn).expect("enqueue");
        diesel::sql_query("DELETE FROM jobqueue_jobs")
            .execute(conn)
            .expect("delete");
    }
    let mut config = RunnerConfig::new(&b.url);
    // After its first, empty claim the runner sleeps on this poll: only a
    // notification wakes it in time.
    config.poll_interval = Duration::from_secs(60);
    let runner = Runner::new(config, registry()).start().expect("start");
    wait_for(
        "the runner's first, empty claim",
        Duration::from_secs(30),
        || runner.stats().empty_claims >= 1,
    );

    // In the other database: a notifying enqueue, rolled back.
    let rolled_back = conn_a.transaction::<(), Error, _>(|conn| {
        BenchNoop { seq: 0 }.enqueue(conn)?;
        Err(Error::NotFound(jobqueue_core::JobId::new()))
    });
    assert!(rolled_back.is_err());
    // At once, an enqueue into this runner's database.
    let waited = time_to_complete(&mut conn_b, |conn| {
        BenchNoop { seq: 0 }.enqueue(conn).expect("enqueue")
    });
    runner.shutdown();
    assert!(
        waited < Duration::from_secs(5),
        "the job waited {waited:?}: its notification was held back"
    );
}
