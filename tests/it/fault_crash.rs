//! Fault injection, crash chaos: four runner processes of eight workers work
//! 20,000 jobs while a random one is killed with SIGKILL about once a second
//! (and replaced) for at least 20 s. Half the jobs write their effect in
//! their completion's transaction (exactly once), half only log each
//! execution (at least once).

use std::time::{Duration, Instant};

use diesel::prelude::*;
use diesel::sql_types::{Array, BigInt, Text};
use jobqueue_core::Job;
use jobqueue_tests::fault::{Proc, Summary, Tally, assert_exit_0, runner_flags};
use jobqueue_tests::jobs::Chaos;
use jobqueue_tests::{TestDb, count_where, wait_for, wait_no_live_jobs};

const WORKER: &str = env!("CARGO_BIN_EXE_jobqueue-test-worker");
const RUNNERS: usize = 4;
const JOBS: usize = 20_000;
/// Each execution sleeps this long: 20,000 x 40 ms over 32 workers is at
/// least 25 s of work, so the 20 s of kills hit work in progress.
const JOB_MS: u64 = 40;
const CHAOS: Duration = Duration::from_secs(20);

#[derive(QueryableByName)]
struct N {
    #[diesel(sql_type = BigInt)]
    n: i64,
}

#[test]
fn kill_9_chaos_loses_nothing_and_does_nothing_twice() {
    let (db, mut conn) = TestDb::with_side_tables();
    let workload: Vec<Chaos> = Chaos::mix(JOBS, JOB_MS).collect();
    for chunk in workload.chunks(2000) {
        Chaos::enqueue_many(&mut conn, chunk).expect("enqueue");
    }

    let mut started = 0;
    let mut start_runner = || {
        started += 1;
        Proc::runner(
            WORKER,
            &db.url,
            &format!("chaos-{started}"),
            &runner_flags(&[("concurrency", "8"), ("lease-secs", "4")]),
        )
    };
    let mut live: Vec<Proc> = (0..RUNNERS).map(|_| start_runner()).collect();
    wait_for(
        "the runners to start working",
        Duration::from_secs(60),
        || count_where(&mut conn, "status = 'completed'") > 0,
    );

    let mut killed: Vec<String> = Vec::new();
    let chaos_started = Instant::now();
    while chaos_started.elapsed() < CHAOS {
        std::thread::sleep(Duration::from_millis(fastrand::u64(700..1300)));
        let mut victim = live.swap_remove(fastrand::usize(..live.len()));
        victim.signal("KILL");
        let status = victim.wait_exit(Duration::from_secs(10));
        assert_eq!(
            status.code(),
            None,
            "{} should have died of SIGKILL",
            victim.name()
        );
        killed.push(victim.name().to_owned());
        live.push(start_runner());
    }
    let chaos_secs = chaos_started.elapsed().as_secs_f64();
    let done_when_chaos_ended = count_where(&mut conn, "status = 'completed'");
    assert!(
        done_when_chaos_ended < JOBS as i64,
        "all jobs were done before the kills ended: the chaos must hit work in progress"
    );

    wait_no_live_jobs(&mut conn, Duration::from_secs(180));
    for runner in &live {
        runner.signal("TERM");
    }
    for runner in &mut live {
        let status = runner.wait_exit(Duration::from_secs(30));
        assert_exit_0(runner, status);
    }

    let tally = Tally::of(&mut conn, "test.chaos", "attempt");
    // Every extra at-least-once execution must be an attempt whose runner
    // was killed: a runner that lived never loses a job it holds.
    let unexplained = diesel::sql_query(
        "SELECT count(*) AS n FROM jobqueue_jobs j JOIN test_effects e ON e.job_id = j.id
         WHERE e.kind = 'attempt' AND e.attempt <> j.attempts
           AND (e.runner IS NULL OR e.runner <> ALL($1))",
    )
    .bind::<Array<Text>, _>(&killed)
    .get_result::<N>(&mut conn)
    .expect("count unexplained re-executions")
    .n;
    // The completing execution is the one of the runner the row names.
    let wrong_completer = count_where(
        &mut conn,
        "status = 'completed' AND NOT EXISTS (SELECT 1 FROM test_effects e
            WHERE e.job_id = jobqueue_jobs.id AND e.attempt = jobqueue_jobs.attempts
              AND e.runner = jobqueue_jobs.worker_id)",
    );
    let recovered = count_where(&mut conn, "errors::text LIKE '%worker lost%'");
    let summary = Summary {
        scenario: "1 crash chaos",
        jobs: tally.jobs,
        faults: killed.len() as i64,
        lost: tally.lost(),
        duplicated: tally.duplicated() + unexplained,
        detail: format!(
            "runners={RUNNERS}x8 kill9_secs={chaos_secs:.1} done_when_kills_ended={done_when_chaos_ended} \
             recovered_jobs={recovered} at_least_once_reexecutions={} held={}",
            tally.reexecutions, tally.held
        ),
    };
    summary.print_and_check();
    assert_eq!(tally.jobs, JOBS as i64);
    assert_eq!(tally.held, 0, "no job left claimed or running");
    assert_eq!(unexplained, 0, "re-executions on runners never killed");
    assert_eq!(wrong_completer, 0, "completions by the wrong runner");
    assert!(
        killed.len() >= 15,
        "about one kill a second for 20 s: {}",
        killed.len()
    );
    assert!(
        recovered > 0,
        "the kills never interrupted a job: nothing was recovered"
    );
}
