//! Interleavings of workflows, keys and retries, each forced with
//! connections of its own and a lock held by another: a statement that
//! decides from a row it does not lock is a race until a test like these
//! shows otherwise. Each test names the interleaving, and failed on the
//! statements as they were before the interleaving was designed for.

use std::sync::mpsc;
use std::thread::{self, JoinHandle};
use std::time::Duration;

use diesel::prelude::*;
use jobqueue_core::engine::{StepDone, complete_step, settle_ended};
use jobqueue_core::{
    Job, JobId, JobOptions, JobStatus, KeyLimit, NewJob, OnFailure, Workflow, cancel, enqueue_many,
    retry_failed, retry_job, set_queue_key_limit,
};
use jobqueue_runner::RunnerConfig;
use jobqueue_runner::maintenance::{AdmitKeys, Service, ServiceContext};
use jobqueue_tests::jobs::{Noop, StepJob, registry};
use jobqueue_tests::{
    TestDb, WAIT_LIMIT, claim_one, count_where, exec, read_job, scalar, wait_for,
};

fn step(n: i64) -> StepJob {
    StepJob {
        n,
        ms: 0,
        fail: false,
    }
}

fn pid(conn: &mut PgConnection) -> i64 {
    scalar(conn, "SELECT pg_backend_pid()::int8 AS n")
}

/// Whether session `pid` waits for a lock another session holds.
fn waits_for_lock(observer: &mut PgConnection, pid: i64) -> bool {
    scalar(
        observer,
        &format!("SELECT count(*) AS n FROM pg_locks WHERE pid = {pid} AND NOT granted"),
    ) > 0
}

/// Waits until session `pid` waits for a lock another session holds.
fn wait_blocked(observer: &mut PgConnection, pid: i64, what: &str) {
    wait_for(what, WAIT_LIMIT, || waits_for_lock(observer, pid));
}

/// A workflow `parent` → `child` named `name`, enqueued: the ids of the
/// parent and the child.
fn parent_and_child(conn: &mut PgConnection, name: &str) -> (JobId, JobId) {
    let mut flow = Workflow::new(name).expect("workflow");
    let parent = flow.add("parent", &step(1)).expect("step");
    let child = flow.add("child", &step(2)).expect("step");
    flow.after(child, [parent]).expect("edge");
    flow.enqueue(conn).expect("enqueue");
    (parent.id(), child.id())
}

/// Runs `f` on a connection of its own, on a thread; returns the thread
/// and the connection's backend pid.
fn on_own_connection<T: Send + 'static>(
    db: &TestDb,
    f: impl FnOnce(&mut PgConnection) -> T + Send + 'static,
) -> (JoinHandle<T>, i64) {
    let mut conn = db.conn();
    let pid = pid(&mut conn);
    (thread::spawn(move || f(&mut conn)), pid)
}

/// A workflow `parent` → `child` whose child an operator cancelled while
/// it waited, and whose parent a worker holds; returns the parent's lease
/// and the child's id.
fn cancelled_child(conn: &mut PgConnection) -> (jobqueue_core::engine::Lease, JobId, JobId) {
    let (parent, child) = parent_and_child(conn, "cancelled child");
    cancel(conn, child).expect("cancel the child");
    assert_eq!(read_job(conn, child).status, JobStatus::Cancelled);
    let lease = claim_one(conn, "worker");
    assert_eq!(lease.job_id, parent);
    (lease, parent, child)
}

fn step_of(conn: &mut PgConnection, id: JobId) -> (String, i64) {
    #[derive(QueryableByName)]
    struct Row {
        #[diesel(sql_type = diesel::sql_types::Text)]
        state: String,
        #[diesel(sql_type = diesel::sql_types::BigInt)]
        parents_left: i64,
    }
    let row = diesel::sql_query(format!(
        "SELECT state, parents_left::int8 AS parents_left
         FROM jobqueue_workflow_steps WHERE job_id = '{id}'"
    ))
    .get_result::<Row>(conn)
    .expect("read the step");
    (row.state, row.parents_left)
}

/// The retry of a cancelled child and the completion of its last parent,
/// both started while a third session holds the child's step, in the order
/// `retry_first` says: whichever takes the step first, the child ends due
/// (before, a retry that decided `blocked` from its snapshot while the
/// completion counted the child down left it blocked with no parent left
/// to release it, for good).
fn retry_races_last_parent(retry_first: bool) {
    let db = TestDb::new();
    let mut conn = db.conn();
    let (lease, _parent, child) = cancelled_child(&mut conn);
    let mut locker = db.conn();
    exec(
        &mut locker,
        &format!(
            "BEGIN; SELECT 1 FROM jobqueue_workflow_steps WHERE job_id = '{child}' FOR UPDATE"
        ),
    );
    let complete = move |conn: &mut PgConnection| complete_step(conn, &StepDone::new(lease), false);
    let retry = move |conn: &mut PgConnection| retry_job(conn, child);
    let (first, second) = if retry_first {
        let (r, r_pid) = on_own_connection(&db, retry);
        wait_blocked(&mut conn, r_pid, "the retry to wait for the step");
        let (c, c_pid) = on_own_connection(&db, complete);
        wait_blocked(&mut conn, c_pid, "the completion to wait for the step");
        (r, c)
    } else {
        let (c, c_pid) = on_own_connection(&db, complete);
        wait_blocked(&mut conn, c_pid, "the completion to wait for the step");
        let (r, r_pid) = on_own_connection(&db, retry);
        wait_blocked(&mut conn, r_pid, "the retry to wait for the step");
        (c, r)
    };
    exec(&mut locker, "COMMIT");
    first
        .join()
        .expect("first thread")
        .expect("first statement");
    second
        .join()
        .expect("second thread")
        .expect("second statement");
    assert_eq!(step_of(&mut conn, child), ("live".to_owned(), 0));
    assert_eq!(
        read_job(&mut conn, child).status,
        JobStatus::Pending,
        "the retried child is due: its only parent completed"
    );
}

#[test]
fn a_retry_that_waits_for_the_last_parents_completion_leaves_the_child_due() {
    retry_races_last_parent(false);
}

#[test]
fn a_completion_that_waits_for_a_retry_of_its_child_releases_the_child() {
    retry_races_last_parent(true);
}

/// A retry of a failed step while the sweep of ends is settling it: the
/// retry waits for the sweep, then makes the step live again (before, the
/// sweep read the job's status without locking it, and a retry that
/// committed meanwhile left the job pending under a step marked failed,
/// so its completion released nothing).
#[test]
fn a_retry_during_the_sweep_of_its_failed_step_leaves_the_step_live() {
    let db = TestDb::new();
    let mut conn = db.conn();
    let (parent, child) = parent_and_child(&mut conn, "swept");
    exec(
        &mut conn,
        &format!(
            "UPDATE jobqueue_jobs SET status = 'failed', finished_at = now() WHERE id = '{parent}'"
        ),
    );
    // The sweep stops at the child it cancels, which another session holds.
    let mut locker = db.conn();
    exec(
        &mut locker,
        &format!("BEGIN; SELECT 1 FROM jobqueue_jobs WHERE id = '{child}' FOR UPDATE"),
    );
    let (sweep, sweep_pid) = on_own_connection(&db, |conn| settle_ended(conn, 1000));
    wait_blocked(&mut conn, sweep_pid, "the sweep to wait for the child");
    let (done, done_rx) = mpsc::channel();
    let (retry, retry_pid) = on_own_connection(&db, move |conn| {
        let result = retry_job(conn, parent);
        let _ = done.send(());
        result
    });
    wait_for("the retry to end or wait", WAIT_LIMIT, || {
        done_rx.try_recv().is_ok() || waits_for_lock(&mut conn, retry_pid)
    });
    exec(&mut locker, "COMMIT");
    let settled = sweep.join().expect("sweep thread").expect("sweep");
    assert_eq!(
        (settled.ended, settled.cancelled),
        (2, 1),
        "the parent, then the child cancelled after it: {settled:?}"
    );
    retry.join().expect("retry thread").expect("retry");
    assert_eq!(read_job(&mut conn, parent).status, JobStatus::Pending);
    assert_eq!(
        step_of(&mut conn, parent).0,
        "live",
        "the retried step is live: its completion will settle it"
    );
}

/// Failed jobs that share a unique key (a recurring job that failed on
/// several days): a retry of every failed job requeues the newest of them
/// and leaves the others failed (before, the second violated the unique
/// index, and nothing was retried).
#[test]
fn a_retry_of_failed_jobs_that_share_a_unique_key_requeues_the_newest() {
    let db = TestDb::new();
    let mut conn = db.conn();
    let mut ids = Vec::new();
    for day in 0..3 {
        let id = Noop { n: day }
            .options()
            .unique_key("nightly-report")
            .enqueue(&mut conn)
            .expect("enqueue")
            .id();
        exec(
            &mut conn,
            &format!(
                "UPDATE jobqueue_jobs SET status = 'failed', finished_at = now() WHERE id = '{id}'"
            ),
        );
        ids.push(id);
    }
    let other = Noop { n: 9 }.enqueue(&mut conn).expect("enqueue").id();
    exec(
        &mut conn,
        &format!(
            "UPDATE jobqueue_jobs SET status = 'failed', finished_at = now() WHERE id = '{other}'"
        ),
    );
    let mut retried = retry_failed(&mut conn, None, None).expect("retry the failed jobs");
    retried.sort_unstable();
    let mut expected = vec![ids[2], other];
    expected.sort_unstable();
    assert_eq!(retried, expected);
    assert_eq!(count_where(&mut conn, "status = 'failed'"), 2);
}

/// A batch of two jobs of one key, limited to one job at a time, whose
/// second was left out by its unique key's holder; the holder finishes
/// right after the batch's insert (a trigger), so the left-out job is
/// inserted alone: it waits for the key's room (before, it reused the room
/// counted before the batch, which the batch's first job had taken, and
/// the key ran two jobs at once).
#[test]
fn a_batch_job_inserted_after_its_unique_keys_holder_finished_respects_the_key_limit() {
    let db = TestDb::new();
    let mut conn = db.conn();
    Noop { n: 0 }
        .options()
        .queue("ledger")
        .enqueue(&mut conn)
        .expect("enqueue");
    set_queue_key_limit(
        &mut conn,
        "ledger",
        Some(KeyLimit::per_key(1).expect("limit")),
    )
    .expect("set the key limit");
    exec(&mut conn, "DELETE FROM jobqueue_jobs");
    let holder = Noop { n: 1 }
        .options()
        .unique_key("u")
        .enqueue(&mut conn)
        .expect("enqueue")
        .id();
    exec(
        &mut conn,
        &format!(
            "CREATE TABLE test_once (done bool NOT NULL);
             INSERT INTO test_once VALUES (false);
             CREATE FUNCTION test_finish_holder() RETURNS trigger LANGUAGE plpgsql AS $$
             BEGIN
                 IF NOT (SELECT done FROM test_once) THEN
                     UPDATE test_once SET done = true;
                     UPDATE jobqueue_jobs SET status = 'completed', finished_at = now()
                     WHERE id = '{holder}';
                 END IF;
                 RETURN NULL;
             END $$;
             CREATE TRIGGER test_finish_holder AFTER INSERT ON jobqueue_jobs
             FOR EACH STATEMENT EXECUTE FUNCTION test_finish_holder();"
        ),
    );
    let keyed = |n: u64, unique: Option<&str>| {
        let mut options = JobOptions::new()
            .queue("ledger")
            .concurrency_key("account-7");
        if let Some(unique) = unique {
            options = options.unique_key(unique);
        }
        NewJob::from_job(&Noop { n }, options).expect("build")
    };
    let enqueued =
        enqueue_many(&mut conn, &[keyed(2, None), keyed(3, Some("u"))]).expect("enqueue");
    assert_eq!(enqueued.inserted.len(), 2, "{enqueued:?}");
    assert_eq!(
        count_where(
            &mut conn,
            "concurrency_key = 'account-7' AND status IN ('pending', 'scheduled', 'claimed', 'running')"
        ),
        1,
        "one holder of the key at a time"
    );
    assert_eq!(count_where(&mut conn, "status = 'waiting'"), 1);
}

/// The maintenance's admission of new waiting jobs while another
/// transaction holds every key lock of their queue (an open bulk enqueue):
/// the pass pages past the jobs it cannot admit and ends, admitting
/// nothing; once the transaction ends, the next pass admits them (before,
/// it read the same thousand jobs again and again, and every maintenance
/// service after it stopped for as long as the transaction stayed open).
#[test]
fn a_pass_of_admissions_ends_while_an_open_transaction_holds_its_keys() {
    const JOBS: usize = 2_500;
    let db = TestDb::new();
    let mut conn = db.conn();
    Noop { n: 0 }
        .options()
        .queue("keyed")
        .enqueue(&mut conn)
        .expect("enqueue");
    set_queue_key_limit(
        &mut conn,
        "keyed",
        Some(KeyLimit::per_key(1).expect("limit")),
    )
    .expect("set the key limit");
    exec(&mut conn, "DELETE FROM jobqueue_jobs");
    let jobs: Vec<NewJob> = (0..JOBS)
        .map(|i| {
            NewJob::from_job(
                &Noop { n: i as u64 },
                JobOptions::new()
                    .queue("keyed")
                    .concurrency_key(format!("k{i}")),
            )
        })
        .collect::<Result<_, _>>()
        .expect("build");
    enqueue_many(&mut conn, &jobs).expect("enqueue");
    // As an enqueue that did not get its keys' locks leaves them.
    exec(
        &mut conn,
        "UPDATE jobqueue_jobs SET status = 'waiting', key_checked = NULL",
    );
    let mut holder = db.conn();
    exec(
        &mut holder,
        "BEGIN;
         SELECT count(pg_advisory_xact_lock(1785817964, hashtext('keyed/' || b::text)))
         FROM generate_series(0, 255) AS b",
    );
    let config = RunnerConfig::new(&db.url).queues(["keyed"]);
    let mut service = AdmitKeys::new(&config);
    let mut cx = ServiceContext::new(config, registry()).expect("a service context");
    let (tx, rx) = mpsc::channel();
    let pass = thread::spawn(move || {
        let report = service.run_once(&mut cx).expect("pass");
        let _ = tx.send(report);
        (service, cx)
    });
    let report = rx
        .recv_timeout(Duration::from_secs(120))
        .expect("the pass ended while the keys' locks were held");
    assert_eq!(report.jobs, 0);
    let (mut service, mut cx) = pass.join().expect("pass thread");
    assert_eq!(
        count_where(&mut conn, "status = 'waiting' AND key_checked IS NOT TRUE"),
        JOBS as i64,
        "the jobs it could not lock are left for a later pass"
    );
    exec(&mut holder, "COMMIT");
    let report = service.run_once(&mut cx).expect("pass");
    assert_eq!(report.jobs, JOBS as i64);
    assert_eq!(count_where(&mut conn, "status = 'pending'"), JOBS as i64);
}

/// A retry of a step whose parent was cancelled, before the parent's own
/// retry: the step waits for the parent (a retry of the parent then runs
/// both), and the doctor warns that it waits for a retry, naming what to
/// do (before, it waited silently, for good if nobody retried the parent).
#[test]
fn a_step_retried_before_its_cancelled_parent_waits_for_it_and_the_doctor_says_so() {
    let db = TestDb::new();
    let mut conn = db.conn();
    let (parent, child) = parent_and_child(&mut conn, "cancelled parent");
    cancel(&mut conn, child).expect("cancel the child");
    cancel(&mut conn, parent).expect("cancel the parent");
    retry_job(&mut conn, child).expect("retry the child");
    settle_ended(&mut conn, 1000).expect("the sweep");
    assert_eq!(read_job(&mut conn, child).status, JobStatus::Blocked);
    let checks =
        jobqueue_core::doctor(&mut conn, &jobqueue_core::DoctorOptions::default()).expect("doctor");
    let workflows = checks
        .iter()
        .find(|c| c.name == "workflows")
        .expect("the workflows check");
    assert_eq!(
        workflows.status,
        jobqueue_core::CheckStatus::Warn,
        "{workflows:#?}"
    );
    assert!(
        workflows
            .evidence
            .contains("1 workflow steps wait for a retry of a step that failed or was cancelled")
            && workflows.advice.contains("retry the step they wait for"),
        "{workflows:#?}"
    );
    retry_job(&mut conn, parent).expect("retry the parent");
    let lease = claim_one(&mut conn, "worker");
    assert_eq!(lease.job_id, parent);
    complete_step(&mut conn, &StepDone::new(lease), false).expect("complete the parent");
    assert_eq!(read_job(&mut conn, child).status, JobStatus::Pending);
}

/// A diamond P → C, P → Y, C → Y whose Y has the lower id, under
/// `on_failure = run` (C's end settles its edge to Y): P's completion
/// counts its children down in id order (Y, then C) and waits for C, which
/// the canceller's transaction holds; the cancel settles C's end, whose
/// child Y the completion holds. The settle leaves C for a later sweep
/// instead of waiting for Y (before, the two waited on each other and
/// PostgreSQL aborted one with a deadlock); both commit, and the sweep
/// settles C, which releases Y.
#[test]
fn a_cancel_and_a_completion_that_share_a_diamond_never_deadlock() {
    let db = TestDb::new();
    let mut conn = db.conn();
    let mut flow = Workflow::new("diamond").expect("workflow");
    flow.on_failure(OnFailure::Run);
    let p = flow.add("p", &step(1)).expect("step");
    let y = flow.add("y", &step(2)).expect("step");
    let c = flow.add("c", &step(3)).expect("step");
    flow.after(c, [p]).expect("edge");
    flow.after(y, [p, c]).expect("edge");
    flow.enqueue(&mut conn).expect("enqueue");
    let (p, y, c) = (p.id(), y.id(), c.id());
    assert!(y < c, "the child added first has the lower id");
    let lease = claim_one(&mut conn, "worker");
    assert_eq!(lease.job_id, p);

    // The canceller holds C's step, then the completion takes Y and waits.
    let mut canceller = db.conn();
    let completion = canceller
        .transaction(|tx| {
            exec(
                tx,
                &format!(
                    "SET LOCAL deadlock_timeout = '100ms';
                     SELECT 1 FROM jobqueue_workflow_steps WHERE job_id = '{c}' FOR UPDATE"
                ),
            );
            let (completion, completion_pid) = on_own_connection(&db, move |conn| {
                complete_step(conn, &StepDone::new(lease), false)
            });
            wait_blocked(
                &mut conn,
                completion_pid,
                "the completion waits for C's step",
            );
            cancel(tx, c).map(|_| completion)
        })
        .expect("the cancel does not wait for Y");
    completion
        .join()
        .expect("the completion's thread")
        .expect("the completion commits");
    assert_eq!(read_job(&mut conn, p).status, JobStatus::Completed);
    assert_eq!(read_job(&mut conn, c).status, JobStatus::Cancelled);

    settle_ended(&mut conn, 1000).expect("the sweep");
    assert_eq!(step_of(&mut conn, c).0, "cancelled");
    assert_eq!(step_of(&mut conn, y), ("live".to_owned(), 0));
    assert_eq!(read_job(&mut conn, y).status, JobStatus::Pending);
}

/// A completion that keeps its job's result waits for the row lock of a
/// rescue that took the lease meanwhile (the claim count bumped in an open
/// transaction), then finds the lease gone: it keeps no result and
/// completes nothing, though its job is still held by the new claim.
#[test]
fn a_completion_with_a_result_behind_a_rescue_keeps_nothing() {
    let (db, mut conn) = TestDb::connected();
    let id = step(1).enqueue(&mut conn).expect("enqueue").id();
    let lease = claim_one(&mut conn, "worker");
    assert_eq!(lease.job_id, id);
    let mut rescuer = db.conn();
    exec(&mut rescuer, "BEGIN");
    exec(
        &mut rescuer,
        &format!("UPDATE jobqueue_jobs SET claim_count = claim_count + 1 WHERE id = '{id}'"),
    );
    let (completion, completer) = on_own_connection(&db, move |conn| {
        let done = StepDone {
            lease,
            result: Some("42".into()),
        };
        jobqueue_core::engine::complete_with_result(conn, &done, true, None)
    });
    wait_blocked(
        &mut conn,
        completer,
        "the completion to wait for the rescue's lock",
    );
    exec(&mut rescuer, "COMMIT");
    let completed = completion.join().expect("the completion's thread");
    assert!(
        matches!(completed, Err(jobqueue_core::Error::LeaseLost { .. })),
        "{completed:?}"
    );
    assert_eq!(
        scalar(&mut conn, "SELECT count(*) AS n FROM jobqueue_results"),
        0,
        "a completion fenced out while it waited keeps no result"
    );
    assert_eq!(count_where(&mut conn, &format!("id = '{id}'")), 1);
}
