//! Wake-ups are debounced per database: an enqueue that notified in one
//! database, in a transaction that rolled back, never holds back the
//! notification of an enqueue into another database.

use std::time::Duration;

use diesel::{Connection, RunQueryDsl};
use jobqueue_core::{Error, Job};
use jobqueue_runner::RunnerConfig;
use jobqueue_tests::{TestDb, noop_time_to_complete, start_idle_noop_runner};
use jobqueue_tools::bench::BenchNoop;

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
    let runner = start_idle_noop_runner(
        RunnerConfig::new(&b.url).keep_completed(jobqueue_tests::KEEP_COMPLETED),
    );

    // In the other database: a notifying enqueue, rolled back.
    let rolled_back = conn_a.transaction::<(), Error, _>(|conn| {
        BenchNoop { seq: 0 }.enqueue(conn)?;
        Err(Error::NotFound(jobqueue_core::JobId::new()))
    });
    assert!(rolled_back.is_err());
    // At once, an enqueue into this runner's database.
    let waited = noop_time_to_complete(&mut conn_b);
    runner.shutdown();
    assert!(
        waited < Duration::from_secs(5),
        "the job waited {waited:?}: its notification was held back"
    );
}
