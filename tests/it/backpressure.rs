//! A runner never holds more jobs than it can work: with completions slowed
//! down for real (a trigger that sleeps on every completed row), the jobs
//! held (claimed, running, or finished with the outcome not yet written)
//! stay within concurrency + prefetch throughout.

use std::time::Duration;

use diesel::prelude::*;
use jobqueue_runner::{Runner, RunnerConfig};
use jobqueue_tests::{TestDb, count_where, enqueue_all};
use jobqueue_tools::bench::{BenchNoop, registry};

#[test]
fn held_jobs_stay_within_the_bound_while_completions_are_slow() {
    const JOBS: usize = 1500;
    let (db, mut conn) = TestDb::connected();
    diesel::sql_query(
        "CREATE FUNCTION slow_completion() RETURNS trigger LANGUAGE plpgsql AS
         $$ BEGIN PERFORM pg_sleep(0.002); RETURN NEW; END $$",
    )
    .execute(&mut conn)
    .expect("create the slow function");
    diesel::sql_query(
        "CREATE TRIGGER slow_completion BEFORE UPDATE ON jobqueue_jobs FOR EACH ROW
         WHEN (NEW.status = 'completed') EXECUTE FUNCTION slow_completion()",
    )
    .execute(&mut conn)
    .expect("create the trigger");
    enqueue_all(&mut conn, (0..JOBS).map(|_| BenchNoop { seq: 0 }));

    let mut config = RunnerConfig::new(&db.url)
        .keep_completed(jobqueue_tests::KEEP_COMPLETED)
        .concurrency(4);
    config.batch_size = 20;
    config.prefetch = Some(2);
    let bound = config.max_held();
    assert_eq!(
        bound,
        4 + 2 * 20 + 4,
        "concurrency + the largest prefetch + the early reserve"
    );
    let runner = Runner::new(config, registry()).start().expect("start");

    let mut largest = 0;
    let mut samples = 0;
    let deadline = std::time::Instant::now() + Duration::from_secs(120);
    loop {
        let held = count_where(&mut conn, "status IN ('claimed', 'running')");
        largest = largest.max(held);
        samples += 1;
        if count_where(&mut conn, "status = 'completed'") == JOBS as i64 {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the jobs were not all completed in 120 s"
        );
        // Sampling interval: the scenario, not a wait for a condition.
        std::thread::sleep(Duration::from_millis(5));
    }
    let summary = runner.shutdown();
    assert_eq!(summary.stats.completed, JOBS as u64);
    println!("held jobs: largest of {samples} samples {largest}, bound {bound}");
    assert!(
        largest as usize <= bound,
        "the runner held {largest} jobs at once; the bound is {bound}"
    );
    assert!(
        largest as usize > 4,
        "the runner never had more than its workers' jobs in hand ({largest}): \
         the test did not load it"
    );
}
