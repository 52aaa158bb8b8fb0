//! A runner's `tracing` spans (the `tracing` feature): an `attempt` span
//! per job on its worker threads, and the debug spans of its claim batches
//! and completion flushes, counting each job once. The capturing
//! subscriber is the process's global default, since the runner's threads
//! do not see a test thread's own: this file holds one test.

use std::time::Duration;

use jobqueue_core::{JobOptions, NewJob, enqueue_many};
use jobqueue_runner::RunnerConfig;
use jobqueue_tests::jobs::{self, Noop};
use jobqueue_tests::span_capture::Capture;
use jobqueue_tests::{TestDb, start_runner, wait_count};
use tracing_subscriber::layer::SubscriberExt;

#[test]
fn a_runner_spans_each_attempt_claim_and_flush() {
    let capture = Capture::default();
    tracing::subscriber::set_global_default(tracing_subscriber::registry().with(capture.clone()))
        .expect("the only global subscriber of this test binary");

    let (db, mut conn) = TestDb::with_side_tables();
    const N: usize = 20;
    let batch: Vec<NewJob> = (0..N as u64)
        .map(|n| NewJob::from_job(&Noop { n }, JobOptions::new()))
        .collect::<Result<_, _>>()
        .expect("build");
    let ids: Vec<String> = enqueue_many(&mut conn, &batch)
        .expect("enqueue")
        .inserted
        .iter()
        .map(|id| id.to_string())
        .collect();
    let config = RunnerConfig::new(&db.url)
        .keep_completed(jobqueue_tests::KEEP_COMPLETED)
        .concurrency(4)
        .lease(Duration::from_secs(30));
    let runner = start_runner(config, jobs::registry());
    wait_count(&mut conn, "status = 'completed'", N as i64);
    let summary = runner.shutdown();
    assert_eq!(summary.stats.completed, N as u64);

    let spans = capture.spans();
    let attempts: Vec<_> = spans.iter().filter(|s| s.name == "attempt").collect();
    for id in &ids {
        let of_job: Vec<_> = attempts
            .iter()
            .filter(|s| s.field("job_id") == Some(id.as_str()))
            .collect();
        assert_eq!(of_job.len(), 1, "one attempt span for {id}: {spans:#?}");
        let attempt = of_job[0];
        assert_eq!(attempt.field("job_type"), Some("test.noop"));
        assert_eq!(attempt.field("attempt"), Some("1"));
        assert_eq!(attempt.field("outcome"), Some("completed"));
        assert_eq!(attempt.parent, None, "a worker's attempt is a root span");
    }
    let sum = |name: &str, field: &str| -> usize {
        spans
            .iter()
            .filter(|s| s.name == name)
            .filter_map(|s| s.field(field))
            .map(|n| n.parse::<usize>().expect("a count"))
            .sum()
    };
    assert_eq!(
        sum("claim", "claimed"),
        N,
        "each job claimed once: {spans:#?}"
    );
    assert!(
        spans
            .iter()
            .filter(|s| s.name == "claim")
            .all(|s| matches!(s.field("by"), Some("fetcher" | "early"))
                && s.field("limit").is_some()),
        "{spans:#?}"
    );
    assert_eq!(
        sum("flush", "written"),
        N,
        "each outcome written once: {spans:#?}"
    );
}
