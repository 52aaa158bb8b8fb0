//! Workflows in one runner process: a step starts only after each step it
//! comes after completed (from the start and finish times the steps
//! record), its parents' results reach it after their rows are deleted,
//! and each failure policy does what it says to the steps after a step
//! that failed for good or was cancelled. Bad graphs are refused with the
//! reason, and nothing of them is inserted.

use std::time::Duration;

use diesel::prelude::*;
use jobqueue_core::{
    Error, Job, JobId, JobStatus, OnFailure, Retention, Workflow, cancel, get_workflow, retry_job,
};
use jobqueue_runner::RunnerConfig;
use jobqueue_tests::jobs::{StepJob, registry};
use jobqueue_tests::{
    TestDb, assert_contains, count_where, run_cli, scalar, start_runner, wait_for,
};

const CLI: &str = env!("CARGO_BIN_EXE_jobqueue-test-worker");

fn step(n: i64) -> StepJob {
    StepJob {
        n,
        ms: 20,
        fail: false,
    }
}

fn failing(n: i64) -> StepJob {
    StepJob {
        n,
        ms: 20,
        fail: true,
    }
}

fn runner_config(db: &TestDb) -> RunnerConfig {
    RunnerConfig::new(&db.url)
        .concurrency(4)
        .poll_interval(Duration::from_millis(100))
}

/// Each step's state by name, from `jobqueue workflow show`'s reading.
fn states(conn: &mut PgConnection, id: JobId) -> Vec<(String, String)> {
    get_workflow(conn, id)
        .expect("read the workflow")
        .found()
        .expect("the workflow")
        .steps
        .into_iter()
        .map(|step| (step.name, step.state))
        .collect()
}

fn state_of(conn: &mut PgConnection, id: JobId, name: &str) -> String {
    states(conn, id)
        .into_iter()
        .find(|(step, _)| step == name)
        .map(|(_, state)| state)
        .unwrap_or_else(|| panic!("no step `{name}`"))
}

fn wait_finished(conn: &mut PgConnection, id: JobId) {
    wait_for("the workflow to finish", Duration::from_secs(60), || {
        get_workflow(conn, id)
            .expect("read the workflow")
            .found()
            .is_some_and(|flow| flow.is_finished())
    });
}

/// The steps whose `start` came before a parent's `done` (or before it
/// had one): none, if every step waited for its parents.
fn early_starts(conn: &mut PgConnection, workflow: JobId) -> i64 {
    scalar(
        conn,
        &format!(
            "SELECT count(*) AS n
             FROM jobqueue_workflow_edges AS e
             JOIN test_effects AS child ON child.job_id = e.child_id AND child.kind = 'start'
             WHERE e.workflow_id = '{workflow}' AND e.kind = 'completed'
               AND NOT EXISTS (SELECT 1 FROM test_effects AS parent
                               WHERE parent.job_id = e.parent_id AND parent.kind = 'done'
                                 AND parent.at <= child.at)"
        ),
    )
}

#[test]
fn steps_start_after_their_parents_and_read_their_results() {
    let (db, mut conn) = TestDb::with_side_tables();
    // transcode -> (thumbnails, preview, captions) -> publish, and an
    // independent branch that joins at publish too.
    let mut flow = Workflow::new("publish video").expect("workflow");
    let transcode = flow.add("transcode", &step(1)).expect("step");
    let middle: Vec<_> = (0..3)
        .map(|i| flow.add(format!("middle-{i}"), &step(10)).expect("step"))
        .collect();
    let side = flow.add("side", &step(100)).expect("step");
    let publish = flow.add("publish", &step(1000)).expect("step");
    for &m in &middle {
        flow.after(m, [transcode]).expect("edge");
    }
    flow.after(publish, middle.iter().copied().chain([side]))
        .expect("edge");
    let enqueued = flow.enqueue(&mut conn).expect("enqueue");
    assert_eq!(enqueued.steps.len(), 6);
    assert_eq!(
        count_where(&mut conn, "status = 'blocked'"),
        4,
        "the three middle steps and publish wait"
    );
    assert_eq!(count_where(&mut conn, "status = 'pending'"), 2);

    let runner = start_runner(runner_config(&db), registry());
    wait_finished(&mut conn, enqueued.id);
    runner.shutdown();

    assert_eq!(early_starts(&mut conn, enqueued.id), 0);
    assert!(
        states(&mut conn, enqueued.id)
            .iter()
            .all(|(_, state)| state == "completed"),
        "{:?}",
        states(&mut conn, enqueued.id)
    );
    let flow = get_workflow(&mut conn, enqueued.id)
        .expect("read")
        .found()
        .expect("workflow");
    let result = |name: &str| {
        flow.steps
            .iter()
            .find(|step| step.name == name)
            .and_then(|step| step.result.clone())
    };
    // Each middle step adds 10 to transcode's 1; publish adds 1000 to the
    // three middles (11 each) and side (100). The rows are gone by then
    // (completed jobs are deleted): the results came from the steps.
    assert_eq!(result("middle-0").as_deref(), Some("11"));
    assert_eq!(result("publish").as_deref(), Some("1133"));
    assert_eq!(count_where(&mut conn, "true"), 0, "completed rows deleted");
    // Each step ran once.
    assert_eq!(
        scalar(
            &mut conn,
            "SELECT count(*) AS n FROM test_effects WHERE kind = 'start'"
        ),
        6
    );
    // The workflow is found by a step's id too.
    let by_step = get_workflow(&mut conn, enqueued.steps[5].1)
        .expect("read")
        .found()
        .expect("found by a step");
    assert_eq!(by_step.id, enqueued.id);

    // A prune deletes the finished workflow with its steps and edges, and
    // keeps one whose steps have not all ended.
    let mut waiting = Workflow::new("not run yet").expect("workflow");
    waiting.add("only", &step(1)).expect("step");
    let waiting = waiting.enqueue(&mut conn).expect("enqueue");
    let pruned = jobqueue_core::engine::prune(
        &mut conn,
        &Retention::default().workflows(Some(Duration::ZERO)),
    )
    .expect("prune");
    assert_eq!(pruned.workflows, 1);
    // A pruned workflow is looked up as a missing job is: why, as far as
    // its id tells.
    match get_workflow(&mut conn, enqueued.id).expect("read") {
        jobqueue_core::WorkflowLookup::NotFound(missing) => assert!(
            matches!(missing.reason, jobqueue_core::Missing::Gone { .. }),
            "{missing}"
        ),
        found => panic!("pruned, not {found:?}"),
    }
    match get_workflow(&mut conn, jobqueue_core::JobId::from(uuid::Uuid::nil())).expect("read") {
        jobqueue_core::WorkflowLookup::NotFound(missing) => assert!(missing.never_issued()),
        found => panic!("never issued, not {found:?}"),
    }
    assert!(
        get_workflow(&mut conn, waiting.id)
            .expect("read")
            .found()
            .is_some()
    );
    assert_eq!(
        scalar(
            &mut conn,
            "SELECT (SELECT count(*) FROM jobqueue_workflow_steps)
                  + (SELECT count(*) FROM jobqueue_workflow_edges) AS n"
        ),
        1,
        "only the waiting workflow's step is left"
    );
}

/// a -> b -> c, and d after a by a "finished" edge, under `policy`, with
/// `a` failing for good on its first run: its workflow id and step ids.
fn failing_chain(conn: &mut PgConnection, policy: OnFailure) -> (JobId, [JobId; 4]) {
    let mut flow = Workflow::new(format!("chain {policy:?}")).expect("workflow");
    flow.on_failure(policy);
    let a = flow.add("a", &failing(1)).expect("step");
    let b = flow.add("b", &step(10)).expect("step");
    let c = flow.add("c", &step(100)).expect("step");
    let d = flow.add("d", &step(1000)).expect("step");
    flow.after(b, [a]).expect("edge");
    flow.after(c, [b]).expect("edge");
    flow.after_finished(d, [a]).expect("edge");
    let enqueued = flow.enqueue(conn).expect("enqueue");
    (enqueued.id, [a.id(), b.id(), c.id(), d.id()])
}

#[test]
fn a_failed_step_cancels_the_steps_after_it_by_default() {
    let (db, mut conn) = TestDb::with_side_tables();
    let (id, [a, b, c, d]) = failing_chain(&mut conn, OnFailure::Cancel);
    let runner = start_runner(runner_config(&db), registry());
    wait_finished(&mut conn, id);
    runner.shutdown();
    let states = states(&mut conn, id);
    assert_eq!(
        states,
        [
            ("a".to_owned(), "failed".to_owned()),
            ("b".to_owned(), "cancelled".to_owned()),
            ("c".to_owned(), "cancelled".to_owned()),
            ("d".to_owned(), "completed".to_owned()),
        ]
    );
    let b_row = jobqueue_tests::read_job(&mut conn, b);
    assert_eq!(b_row.status, JobStatus::Cancelled);
    assert!(
        b_row
            .last_error
            .as_deref()
            .is_some_and(|e| e.contains("step `a`")),
        "{:?}",
        b_row.last_error
    );
    for never in [b, c] {
        assert_eq!(
            scalar(
                &mut conn,
                &format!("SELECT count(*) AS n FROM test_effects WHERE job_id = '{never}'")
            ),
            0,
            "a cancelled step never started"
        );
    }
    let _ = (a, d);

    // What `jobqueue workflow show` prints of it, by its id or a step's.
    let (code, out, err) = run_cli(CLI, &db.url, &["workflow", "show", &id.to_string()]);
    assert_eq!(code, Some(0), "{err}");
    assert_contains(
        &out,
        &[
            "chain Cancel",
            "on failure:    cancel",
            "4 (1 completed, 1 failed, 2 cancelled, 0 not ended)",
        ],
    );
    let line = |name: &str| {
        out.lines()
            .find(|line| line.starts_with(&format!("{name} ")))
            .unwrap_or_else(|| panic!("no line for step {name}:\n{out}"))
            .to_owned()
    };
    assert_contains(&line("b"), &["cancelled", "a (1 left)"]);
    assert_contains(&line("d"), &["completed", "1000"]);
    let (code, out, err) = run_cli(
        CLI,
        &db.url,
        &["workflow", "show", &b.to_string(), "--json"],
    );
    assert_eq!(code, Some(0), "{err}");
    let doc: serde_json::Value = serde_json::from_str(&out).expect("JSON");
    assert_eq!(doc["id"], id.to_string());
    assert_eq!(doc["finished"], true);
    assert_eq!(doc["steps"][3]["result"], 1000);
    assert_eq!(doc["steps"][1]["after"], serde_json::json!(["a"]));
    assert_eq!(doc["steps"][1]["state"], "cancelled");
    let (code, _, err) = run_cli(
        CLI,
        &db.url,
        &["workflow", "show", &JobId::new().to_string()],
    );
    assert_eq!(code, Some(1), "{err}");
    assert!(err.contains("no workflow with id"), "{err}");

    // `jobqueue workflow list`: newest first, its steps counted by state;
    // `--unfinished` leaves the finished one out.
    let (later, _) = failing_chain(&mut conn, OnFailure::Wait);
    let (code, out, err) = run_cli(CLI, &db.url, &["workflow", "list"]);
    assert_eq!(code, Some(0), "{err}");
    let rows: Vec<&str> = out.lines().skip(1).collect();
    assert_eq!(rows.len(), 2, "{out}");
    assert!(rows[0].starts_with(&later.to_string()), "{out}");
    assert_contains(rows[0], &["running", "chain Wait"]);
    assert!(rows[1].starts_with(&id.to_string()), "{out}");
    let counts: Vec<&str> = rows[1].split_whitespace().skip(1).take(6).collect();
    assert_eq!(counts, ["failed", "4", "1", "1", "2", "0"], "{out}");
    let (code, out, err) = run_cli(
        CLI,
        &db.url,
        &["workflow", "list", "--unfinished", "--json"],
    );
    assert_eq!(code, Some(0), "{err}");
    let lines = jobqueue_tests::json_lines(&out);
    assert_eq!(lines.len(), 1, "{out}");
    assert_eq!(lines[0]["id"], later.to_string());
    assert_eq!(lines[0]["state"], "running");
    assert_eq!(lines[0]["not_ended"], 4);
    assert_eq!(lines[0]["on_failure"], "wait");
    let (code, _, err) = run_cli(CLI, &db.url, &["workflow", "list", "--limit", "0"]);
    assert_eq!(code, Some(2), "{err}");
    assert!(
        err.contains("limit") && err.contains("1 to 100000"),
        "{err}"
    );
}

#[test]
fn under_run_the_steps_after_a_failed_one_run_anyway() {
    let (db, mut conn) = TestDb::with_side_tables();
    let (id, _) = failing_chain(&mut conn, OnFailure::Run);
    let runner = start_runner(runner_config(&db), registry());
    wait_finished(&mut conn, id);
    runner.shutdown();
    let states = states(&mut conn, id);
    assert_eq!(
        states.iter().map(|(_, s)| s.as_str()).collect::<Vec<_>>(),
        ["failed", "completed", "completed", "completed"]
    );
}

#[test]
fn under_wait_the_steps_after_a_failed_one_wait_for_its_retry() {
    let (db, mut conn) = TestDb::with_side_tables();
    let (id, [a, b, c, _]) = failing_chain(&mut conn, OnFailure::Wait);
    let runner = start_runner(runner_config(&db), registry());
    wait_for("a to fail and d to run", Duration::from_secs(60), || {
        state_of(&mut conn, id, "a") == "failed" && state_of(&mut conn, id, "d") == "completed"
    });
    // Settled, and still waiting: a sweep of ends moves nothing.
    let settled = jobqueue_core::engine::settle_ended(&mut conn, 1000).expect("settle the ends");
    assert_eq!(settled.ended, 0, "a's end was settled by its runner");
    assert_eq!(
        jobqueue_tests::read_job(&mut conn, b).status,
        JobStatus::Blocked
    );
    retry_job(&mut conn, a).expect("retry a");
    wait_finished(&mut conn, id);
    runner.shutdown();
    assert_eq!(
        states(&mut conn, id)
            .iter()
            .map(|(_, s)| s.as_str())
            .collect::<Vec<_>>(),
        ["completed", "completed", "completed", "completed"]
    );
    assert_eq!(early_starts(&mut conn, id), 0);
    let _ = c;
}

#[test]
fn cancelling_a_waiting_step_cancels_the_steps_after_it() {
    let (db, mut conn) = TestDb::with_side_tables();
    let mut flow = Workflow::new("cancelled midway").expect("workflow");
    let a = flow.add("a", &step(1)).expect("step");
    let b = flow.add("b", &step(2)).expect("step");
    let c = flow.add("c", &step(3)).expect("step");
    flow.after(b, [a]).expect("edge");
    flow.after(c, [b]).expect("edge");
    let enqueued = flow.enqueue(&mut conn).expect("enqueue");
    // An operator cancels b before anything ran: c, after it, is
    // cancelled in the same call.
    cancel(&mut conn, b.id()).expect("cancel b");
    assert_eq!(
        jobqueue_tests::read_job(&mut conn, c.id()).status,
        JobStatus::Cancelled
    );
    let runner = start_runner(runner_config(&db), registry());
    wait_finished(&mut conn, enqueued.id);
    runner.shutdown();
    assert_eq!(
        states(&mut conn, enqueued.id)
            .iter()
            .map(|(_, s)| s.as_str())
            .collect::<Vec<_>>(),
        ["completed", "cancelled", "cancelled"]
    );
    let _ = c;
}

#[test]
fn bad_graphs_are_refused_and_nothing_is_inserted() {
    let (_db, mut conn) = TestDb::with_side_tables();
    let mut flow = Workflow::new("loop").expect("workflow");
    let a = flow.add("a", &step(1)).expect("step");
    let b = flow.add("b", &step(2)).expect("step");
    let c = flow.add("c", &step(3)).expect("step");
    flow.after(b, [a]).expect("edge");
    flow.after(c, [b]).expect("edge");
    flow.after(a, [c]).expect("edge");
    let err = flow.enqueue(&mut conn).expect_err("a cycle");
    assert!(matches!(err, Error::InvalidWorkflow { .. }), "{err:?}");
    assert!(err.is_input());
    let text = err.to_string();
    assert!(text.contains("workflow `loop` refused"), "{text}");
    assert!(text.contains("cycle"), "{text}");
    for name in ["a", "b", "c"] {
        assert!(text.contains(name), "{text}");
    }

    let mut one = Workflow::new("one").expect("workflow");
    let mut other = Workflow::new("other").expect("workflow");
    let mine = one.add("mine", &step(1)).expect("step");
    let theirs = other.add("theirs", &step(1)).expect("step");
    let err = one.after(mine, [theirs]).expect_err("a step of another");
    assert!(
        err.to_string().contains("belongs to another workflow"),
        "{err}"
    );

    let err = Workflow::new("empty")
        .expect("workflow")
        .enqueue(&mut conn)
        .expect_err("no steps");
    assert!(err.to_string().contains("no steps"), "{err}");

    let err = Workflow::new("").expect_err("an empty name");
    assert!(err.to_string().contains("workflow name"), "{err}");

    let mut keyed = Workflow::new("keyed").expect("workflow");
    let with_key = step(1).options().unique_key("once").build().expect("a job");
    let err = keyed.add_job("k", with_key).expect_err("a unique key");
    assert!(err.to_string().contains("unique key"), "{err}");

    assert_eq!(count_where(&mut conn, "true"), 0, "no job inserted");
    assert_eq!(
        scalar(&mut conn, "SELECT count(*) AS n FROM jobqueue_workflows"),
        0
    );
}

/// The testing kit's drain works a workflow as runners do, inside the
/// test's transaction: steps in order, results handed on, and a failed
/// step's dependents cancelled.
#[test]
fn the_testing_kits_drain_works_a_workflow_in_order() {
    use diesel::Connection;
    let (_db, mut conn) = TestDb::with_side_tables();
    conn.begin_test_transaction().expect("test transaction");
    let mut flow = Workflow::new("drained").expect("workflow");
    let a = flow.add("a", &step(1)).expect("step");
    let b = flow.add("b", &step(10)).expect("step");
    let c = flow.add("c", &failing(100)).expect("step");
    let d = flow.add("d", &step(1000)).expect("step");
    let e = flow.add("e", &step(5)).expect("step");
    flow.after(b, [a]).expect("edge");
    flow.after(c, [a]).expect("edge");
    flow.after(d, [b]).expect("edge");
    flow.after(e, [c]).expect("edge");
    let enqueued = flow.enqueue(&mut conn).expect("enqueue");
    // Each round works the steps its steps released: three rounds here.
    let drained = jobqueue_testing::Drain::new(&registry())
        .recursive(10)
        .run(&mut conn)
        .expect("drain");
    let order: Vec<JobId> = drained.jobs.iter().map(|job| job.id).collect();
    let at = |id: JobId| order.iter().position(|&o| o == id);
    assert_eq!(order.len(), 4, "{drained}");
    assert_eq!(drained.jobs.iter().map(|job| job.round).max(), Some(3));
    assert!(
        at(a.id()) < at(b.id()) && at(b.id()) < at(d.id()),
        "{drained}"
    );
    assert!(at(a.id()) < at(c.id()), "{drained}");
    assert_eq!(at(e.id()), None, "e comes after c, which failed");
    assert_eq!(
        states(&mut conn, enqueued.id)
            .iter()
            .map(|(_, s)| s.as_str())
            .collect::<Vec<_>>(),
        ["completed", "completed", "failed", "completed", "cancelled"]
    );
    let flow = get_workflow(&mut conn, enqueued.id)
        .expect("read")
        .found()
        .expect("workflow");
    assert_eq!(flow.steps[3].result.as_deref(), Some("1011"));
}

/// A parent that fails an attempt and retries releases nothing until the
/// attempt that completes.
#[test]
fn a_parents_retry_does_not_release_its_children_early() {
    let (db, mut conn) = TestDb::with_side_tables();
    let mut flow = Workflow::new("retried parent").expect("workflow");
    let parent = flow
        .add(
            "parent",
            &jobqueue_tests::jobs::Stumble {
                ms: 20,
                first: "fail".into(),
            },
        )
        .expect("step");
    let child = flow.add("child", &step(1)).expect("step");
    flow.after(child, [parent]).expect("edge");
    let enqueued = flow.enqueue(&mut conn).expect("enqueue");
    let runner = start_runner(runner_config(&db), registry());
    wait_finished(&mut conn, enqueued.id);
    runner.shutdown();
    assert_eq!(
        scalar(
            &mut conn,
            &format!(
                "SELECT count(*) AS n FROM test_effects
                 WHERE job_id = '{}' AND kind = 'fail'",
                parent.id()
            )
        ),
        1,
        "the parent failed its first attempt"
    );
    assert_eq!(early_starts(&mut conn, enqueued.id), 0);
    assert_eq!(
        scalar(
            &mut conn,
            &format!(
                "SELECT count(*) AS n FROM test_effects AS c, test_effects AS p
                 WHERE c.job_id = '{}' AND c.kind = 'start'
                   AND p.job_id = '{}' AND p.attempt = 2 AND p.kind = 'start'
                   AND c.at > p.at",
                child.id(),
                parent.id()
            )
        ),
        1,
        "the child started after the parent's second attempt did"
    );
}

/// A step cancelled together with one of its parents (both after a step
/// that failed) is settled after that parent: the parent's "finished"
/// edge counts it down, and a retry of the failed step then runs it.
#[test]
fn a_step_cancelled_with_its_parent_is_settled_after_it() {
    let (db, mut conn) = TestDb::with_side_tables();
    let mut flow = Workflow::new("cancelled together").expect("workflow");
    let a = flow.add("a", &failing(1)).expect("step");
    let c = flow.add("c", &step(100)).expect("step");
    let d = flow.add("d", &step(10)).expect("step");
    flow.after(c, [a]).expect("edge");
    flow.after(d, [a]).expect("edge");
    flow.after_finished(c, [d]).expect("edge");
    let enqueued = flow.enqueue(&mut conn).expect("enqueue");
    // a fails for good (its first run); c and d are cancelled after it,
    // then settled, d's finished edge counting c down.
    jobqueue_tests::exec(
        &mut conn,
        &format!(
            "UPDATE jobqueue_jobs SET status = 'failed', finished_at = now() WHERE id = '{}'",
            a.id()
        ),
    );
    jobqueue_tests::exec(
        &mut conn,
        &format!(
            "INSERT INTO test_effects (job_id, attempt, kind) VALUES ('{}', 1, 'fail')",
            a.id()
        ),
    );
    let settled = jobqueue_core::engine::settle_ended_of(&mut conn, &[a.id()]).expect("settle");
    assert_eq!((settled.ended, settled.cancelled), (3, 2), "{settled:?}");
    let flow = get_workflow(&mut conn, enqueued.id)
        .expect("read")
        .found()
        .expect("workflow");
    let c_step = &flow.steps[1];
    assert_eq!(
        (c_step.state.as_str(), c_step.parents_left),
        ("cancelled", 1),
        "c waits for a only: {c_step:?}"
    );
    // Retried, c waits for a; a retried completes, and c runs after it.
    retry_job(&mut conn, c.id()).expect("retry c");
    assert_eq!(
        jobqueue_tests::read_job(&mut conn, c.id()).status,
        JobStatus::Blocked
    );
    retry_job(&mut conn, a.id()).expect("retry a");
    let runner = start_runner(runner_config(&db), registry());
    wait_for("c to complete", Duration::from_secs(60), || {
        state_of(&mut conn, enqueued.id, "c") == "completed"
    });
    runner.shutdown();
    assert_eq!(early_starts(&mut conn, enqueued.id), 0);
    assert_eq!(state_of(&mut conn, enqueued.id, "d"), "cancelled");
}

/// A step whose job row went before the step was settled (a cancelled row
/// deleted at once, an operator's delete): the sweep settles it as
/// cancelled and the steps after it as its workflow says, so the workflow
/// finishes (it stayed live for good, and was never pruned).
#[test]
fn a_step_whose_row_was_deleted_before_it_was_settled_is_settled_as_cancelled() {
    let (_db, mut conn) = TestDb::with_side_tables();
    let mut flow = Workflow::new("row gone").expect("workflow");
    let a = flow.add("a", &step(1)).expect("step");
    let b = flow.add("b", &step(2)).expect("step");
    flow.after(b, [a]).expect("edge");
    let enqueued = flow.enqueue(&mut conn).expect("enqueue");
    jobqueue_tests::exec(
        &mut conn,
        &format!("DELETE FROM jobqueue_jobs WHERE id = '{}'", a.id()),
    );
    jobqueue_core::engine::settle_ended(&mut conn, 100).expect("settle");
    assert_eq!(state_of(&mut conn, enqueued.id, "a"), "cancelled");
    assert_eq!(state_of(&mut conn, enqueued.id, "b"), "cancelled");
    assert!(
        get_workflow(&mut conn, enqueued.id)
            .expect("read")
            .found()
            .expect("workflow")
            .is_finished()
    );
}

/// A workflow whose steps all ended is kept while one of its failed jobs
/// is (failed jobs are kept longer than workflows by default): a retry of
/// that step still finds its step and the steps after it. Once the failed
/// row goes, the workflow is pruned.
#[test]
fn a_workflow_is_kept_while_one_of_its_failed_jobs_is() {
    let (_db, mut conn) = TestDb::with_side_tables();
    let mut chain = Workflow::new("kept").expect("workflow");
    let a = chain.add("a", &failing(1)).expect("step");
    let b = chain.add("b", &step(2)).expect("step");
    chain.after(b, [a]).expect("edge");
    let flow = chain.enqueue(&mut conn).expect("enqueue").id;
    let a = a.id();
    jobqueue_tests::exec(
        &mut conn,
        &format!(
            "UPDATE jobqueue_jobs SET status = 'failed', finished_at = now() WHERE id = '{a}'"
        ),
    );
    jobqueue_core::engine::settle_ended(&mut conn, 1000).expect("settle");
    assert!(
        get_workflow(&mut conn, flow)
            .expect("read")
            .found()
            .expect("workflow")
            .is_finished()
    );
    let keep_none = Retention::default().workflows(Some(Duration::ZERO));
    let pruned = jobqueue_core::engine::prune(&mut conn, &keep_none).expect("prune");
    assert_eq!(pruned.workflows, 0, "kept while a's failed row is");
    assert!(
        get_workflow(&mut conn, flow)
            .expect("read")
            .found()
            .is_some()
    );
    jobqueue_tests::exec(
        &mut conn,
        &format!("DELETE FROM jobqueue_jobs WHERE id = '{a}'"),
    );
    let pruned = jobqueue_core::engine::prune(&mut conn, &keep_none).expect("prune");
    assert_eq!(pruned.workflows, 1);
}
