//! The stateful checker, short: three runner processes of the test worker
//! and a seeded adversary (workflows, batches, keyed and ordered jobs in
//! rate-limited and limited queues; retries, cancels, deletes, pauses,
//! limit changes, SIGKILLed runners, a PostgreSQL restart) on a cluster of
//! the checker's own; the oracle reads the database-written log (see
//! `jobqueue_tools::bench::chaos` for the invariants). Each run prints its
//! seed and what it found; `JOBQUEUE_CHAOS_SEED=<n>` replays one seed
//! instead of the fixed ones. The long run is `jobqueue bench --only chaos`.

use jobqueue_tools::bench::chaos::{ChaosOptions, check_names, run, seed_from_env};

const WORKER: &str = env!("CARGO_BIN_EXE_jobqueue-test-worker");
/// Adversary operations per run: a few seconds of work.
const OPS: usize = 200;

fn check(seed: u64, restarts: usize) {
    let mut options = ChaosOptions::new(seed, OPS, WORKER);
    options.restarts = restarts;
    let report = run(&options).unwrap_or_else(|e| panic!("chaos seed {seed}: {e}"));
    eprintln!("{}", report.describe());
    assert!(
        report.total_ops() > OPS / 2,
        "the adversary did too little: {}",
        report.describe()
    );
    assert!(report.claims > 0, "nothing was claimed");
    assert!(
        report.findings.is_empty(),
        "invariants broken; replay with JOBQUEUE_CHAOS_SEED={seed}:\n{}",
        report.describe()
    );
}

#[test]
fn seeded_adversaries_break_no_invariant() {
    match seed_from_env().expect("a valid JOBQUEUE_CHAOS_SEED") {
        Some(seed) => check(seed, 1),
        None => {
            check(1, 0);
            check(2, 1);
        }
    }
}

/// The oracle's own test: a short run with one violation of each
/// invariant planted in the log (and a job left behind) must report every
/// check, each with the planted violation only.
#[test]
fn the_oracle_reports_a_planted_violation_of_each_invariant() {
    let mut options = ChaosOptions::new(7, 40, WORKER);
    options.plant = true;
    let report = run(&options).expect("a planted run");
    eprintln!("{}", report.describe());
    for check in check_names() {
        let found = report.findings.iter().find(|f| f.check == check);
        assert!(
            found.is_some(),
            "the planted violation of `{check}` went unreported:\n{}",
            report.describe()
        );
    }
}
