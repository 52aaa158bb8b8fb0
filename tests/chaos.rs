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

/// Found by the checker (seeds 1 and 10733384952162253235, timing
/// permitting): a retried step stays `blocked` forever once a parent it
/// waits for already failed or was cancelled and settled. Workflow
/// `parent` → `child` (on failure: cancel). An operator cancels the
/// waiting child, then the parent: the parent's settling dooms only
/// `blocked` children, so the child (already cancelled) is passed over and
/// the edge stays unsettled. Retrying the child (`JOB_RETRY`) reads
/// `parents_left = 1` and sets it `blocked`; nothing ever counts that
/// edge down or dooms the child again (the sweep reads only live steps
/// whose jobs ended, and the parent's step has ended), so the child is
/// never run, cancelled or pruned, and a batch's `on_success` in its place
/// never runs. Expected: the retry, or the sweep after it, settles the
/// child as its workflow says (cancelled, since its parent did not complete).
#[test]
#[ignore = "bug: a retried workflow step whose parent already ended uncompleted stays blocked forever"]
fn a_retried_step_whose_parent_was_cancelled_is_not_blocked_forever() {
    use jobqueue_core::engine::settle_ended;
    use jobqueue_core::{JobStatus, Workflow, cancel, retry_job};
    use jobqueue_tests::jobs::Noop;
    use jobqueue_tests::{TestDb, read_job, scalar};

    let (_db, mut conn) = TestDb::connected();
    let mut flow = Workflow::new("cancelled parent").expect("workflow");
    let parent = flow.add("parent", &Noop { n: 1 }).expect("step");
    let child = flow.add("child", &Noop { n: 2 }).expect("step");
    flow.after(child, [parent]).expect("edge");
    flow.enqueue(&mut conn).expect("enqueue");

    cancel(&mut conn, child.id()).expect("cancel the waiting child");
    cancel(&mut conn, parent.id()).expect("cancel the parent");
    retry_job(&mut conn, child.id()).expect("retry the child");
    // What every runner's maintenance runs each rescue interval.
    settle_ended(&mut conn, 1000).expect("the sweep of ended steps");

    let status = read_job(&mut conn, child.id()).status;
    let parents_left = scalar(
        &mut conn,
        &format!(
            "SELECT parents_left::int8 AS n FROM jobqueue_workflow_steps
             WHERE job_id = '{}'",
            child.id()
        ),
    );
    assert_ne!(
        status,
        JobStatus::Blocked,
        "the child waits for a parent that was cancelled and will never complete \
         (parents_left {parents_left}): blocked forever"
    );
}
