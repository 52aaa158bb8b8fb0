//! Workflows and batches under crashes: four runner processes, one of them
//! SIGKILLed and replaced every two seconds, work 1,000 five-step
//! workflows (a fan-out of three after one step, then a fan-in) and 100
//! batches of ten with both callbacks. No step starts before every step
//! it comes after completed (the steps' recorded start times against their
//! parents' completion times), every fan-in reads all of its parents'
//! results, every callback that should run ran its effect exactly once and
//! the others never started, and no workflow is left unfinished.

use std::time::{Duration, Instant};

use diesel::prelude::*;
use jobqueue_core::{Batch, Job, NewJob, Workflow, get_workflow};
use jobqueue_tests::fault::{Proc, runner_flags};
use jobqueue_tests::jobs::{Effect, StepJob};
use jobqueue_tests::{TestDb, count_where, poll_until, scalar};

const WORKER: &str = env!("CARGO_BIN_EXE_jobqueue-test-worker");
const WORKFLOWS: usize = 1000;
const BATCHES: usize = 100;
const MEMBERS: usize = 10;

/// A step of `n` that survives many kills (attempts enough for them).
fn step(n: i64, fail: bool) -> NewJob {
    StepJob { n, ms: 10, fail }
        .options()
        .max_attempts(50)
        .build()
        .expect("a job")
}

fn enqueue_workflows(conn: &mut PgConnection) {
    for w in 0..WORKFLOWS {
        let mut flow = Workflow::new(format!("five steps {w}")).expect("workflow");
        let first = flow.add_job("first", step(1, false)).expect("step");
        let fan: Vec<_> = (0..3)
            .map(|i| {
                flow.add_job(format!("fan-{i}"), step(10, false))
                    .expect("step")
            })
            .collect();
        let last = flow.add_job("last", step(1000, false)).expect("step");
        for &f in &fan {
            flow.after(f, [first]).expect("edge");
        }
        flow.after(last, fan).expect("edge");
        flow.enqueue(conn).expect("enqueue a workflow");
    }
}

/// Batches whose index is a multiple of ten have a member that fails for
/// good.
fn enqueue_batches(conn: &mut PgConnection) {
    for b in 0..BATCHES {
        let mut batch = Batch::new(format!("batch {b}")).expect("batch");
        for m in 0..MEMBERS {
            batch
                .add_job(step(1, b % 10 == 0 && m == 3))
                .expect("member");
        }
        batch
            .on_success(&Effect { pause: false })
            .expect("on_success");
        batch
            .on_finish(&Effect { pause: false })
            .expect("on_finish");
        batch.enqueue(conn).expect("enqueue a batch");
    }
}

fn unfinished(conn: &mut PgConnection) -> i64 {
    scalar(
        conn,
        "SELECT count(*) AS n FROM jobqueue_workflow_steps WHERE state = 'live'",
    )
}

#[test]
fn crashes_neither_start_a_step_early_nor_lose_or_double_a_release() {
    let (db, mut conn) = TestDb::with_side_tables();
    enqueue_workflows(&mut conn);
    enqueue_batches(&mut conn);
    let total = (WORKFLOWS * 5 + BATCHES * (MEMBERS + 2)) as i64;
    assert_eq!(
        scalar(
            &mut conn,
            "SELECT count(*) AS n FROM jobqueue_workflow_steps"
        ),
        total
    );

    let flags = runner_flags(&[("lease-secs", "2")]);
    let mut next = 0;
    let start = |next: &mut usize| {
        *next += 1;
        Proc::runner(WORKER, &db.url, &format!("flow-{next}"), &flags)
    };
    let mut runners: Vec<Proc> = (0..4).map(|_| start(&mut next)).collect();
    let deadline = Instant::now() + Duration::from_secs(240);
    let mut kills = 0;
    // Until every step ended: a runner killed and replaced each 2 s.
    while !poll_until(Duration::from_secs(2), || unfinished(&mut conn) == 0) {
        assert!(
            Instant::now() < deadline,
            "{} steps still unfinished after 240 s",
            unfinished(&mut conn)
        );
        let mut victim = runners.swap_remove(kills % runners.len());
        victim.signal("KILL");
        victim.wait_exit(Duration::from_secs(10));
        runners.push(start(&mut next));
        kills += 1;
    }
    for runner in &mut runners {
        runner.terminate(Duration::from_secs(30));
    }

    // No step started before a step it comes after completed: each
    // child's first start came after its parent's completion, and after
    // the last `done` its parent's handler recorded.
    let early = scalar(
        &mut conn,
        "SELECT count(*) AS n
         FROM jobqueue_workflow_edges AS e
         JOIN jobqueue_workflow_steps AS parent ON parent.job_id = e.parent_id
         JOIN test_effects AS child ON child.job_id = e.child_id AND child.kind IN ('start', 'effect')
         WHERE e.kind = 'completed'
           AND (parent.state <> 'completed' OR child.at <= parent.ended_at
                OR child.at < (SELECT max(at) FROM test_effects AS d
                               WHERE d.job_id = e.parent_id AND d.kind = 'done'))",
    );
    // Every fan-in read its three parents' results (3 × 11 + 1000).
    let wrong_sums = scalar(
        &mut conn,
        "SELECT count(*) AS n FROM jobqueue_workflow_steps
         WHERE name = 'last' AND (state <> 'completed' OR result <> '1033'::jsonb)",
    );
    // Callbacks: each batch's effects of `step`, against what its members
    // came to. A member meant to fail fails on its first run only (a kill
    // between that run and the write of its failure has it run again and
    // complete), so what a batch expects is read from its members' states.
    let callbacks_ran = |conn: &mut PgConnection, step: &str| {
        scalar(
            conn,
            &format!(
                "SELECT count(*) AS n FROM test_effects AS e
                 JOIN jobqueue_workflow_steps AS s ON s.job_id = e.job_id
                 WHERE s.name = '{step}' AND e.kind = 'effect'"
            ),
        )
    };
    let batches_failed = scalar(
        &mut conn,
        "SELECT count(DISTINCT workflow_id) AS n FROM jobqueue_workflow_steps
         WHERE name NOT IN ('on_success', 'on_finish') AND state = 'failed'",
    );
    // on_success ran once where every member completed, never elsewhere.
    let success_wrong = scalar(
        &mut conn,
        "SELECT count(*) AS n FROM jobqueue_workflow_steps AS cb
         WHERE cb.name = 'on_success'
           AND (SELECT count(*) FROM test_effects AS e
                WHERE e.job_id = cb.job_id AND e.kind = 'effect')
               <> CASE WHEN EXISTS (SELECT 1 FROM jobqueue_workflow_steps AS m
                                    WHERE m.workflow_id = cb.workflow_id
                                      AND m.name NOT IN ('on_success', 'on_finish')
                                      AND m.state <> 'completed')
                       THEN 0 ELSE 1 END",
    );
    let success_ran = callbacks_ran(&mut conn, "on_success");
    let finish_ran = callbacks_ran(&mut conn, "on_finish");
    let success_cancelled = scalar(
        &mut conn,
        "SELECT count(*) AS n FROM jobqueue_workflow_steps
         WHERE name = 'on_success' AND state = 'cancelled'",
    );
    let restarted = scalar(
        &mut conn,
        "SELECT count(DISTINCT job_id) AS n FROM test_effects
         WHERE kind = 'start' AND attempt > 1",
    );
    eprintln!(
        "{WORKFLOWS} five-step workflows and {BATCHES} batches of {MEMBERS}, 4 runners, \
         {kills} kills: {early} steps started early, {wrong_sums} fan-ins with a wrong sum, \
         {batches_failed} batches with a member failed for good; on_success ran {success_ran} \
         times, {success_cancelled} cancelled, {success_wrong} against its members' states; \
         on_finish ran {finish_ran} \
         times (100 expected); {restarted} jobs started again after a kill"
    );
    assert!(kills >= 3, "only {kills} kills");
    assert!(restarted > 0, "a kill hit running jobs");
    assert_eq!(early, 0, "steps started before their parents completed");
    assert_eq!(wrong_sums, 0);
    assert!(
        batches_failed >= 5,
        "only {batches_failed} batches had a member fail"
    );
    assert_eq!(
        success_wrong, 0,
        "on_success ran where it should not, or twice"
    );
    assert_eq!(success_ran + success_cancelled, BATCHES as i64);
    assert_eq!(success_cancelled, batches_failed);
    assert_eq!(
        finish_ran, BATCHES as i64,
        "each on_finish ran its effect once"
    );
    assert_eq!(count_where(&mut conn, "status = 'blocked'"), 0);
    // Every workflow is finished as `workflow show` reads it.
    let ids: Vec<jobqueue_core::JobId> = diesel::sql_query("SELECT id FROM jobqueue_workflows")
        .load::<IdRow>(&mut conn)
        .expect("ids")
        .into_iter()
        .map(|row| row.id)
        .collect();
    assert_eq!(ids.len(), WORKFLOWS + BATCHES);
    for id in ids.iter().step_by(97) {
        let flow = get_workflow(&mut conn, *id)
            .expect("read")
            .found()
            .expect("found");
        assert!(flow.is_finished(), "{flow:?}");
    }
}

#[derive(QueryableByName)]
struct IdRow {
    #[diesel(sql_type = diesel::sql_types::Uuid)]
    id: jobqueue_core::JobId,
}
