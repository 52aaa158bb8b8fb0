//! The hot path's plans, and the maintenance statements' (the rescue of
//! expired leases, the prune of finished jobs), stay bounded by the
//! statement's own batch in every table state: a fresh table, after
//! TRUNCATE, with statistics claiming the table is empty, with statistics
//! of dead rows only, with statistics taken before the jobs were claimed,
//! and with 1,000,000 rows. Each statement runs under `EXPLAIN ANALYZE` on
//! a queue session (rolled back); the checks are on the indexes used and
//! the rows examined, never on time. The admission statements of keyed
//! jobs too, with lines of waiting jobs the statistics know nothing of.

use std::time::Duration;

use diesel::prelude::*;
use jobqueue_core::engine::{
    Claim, Failure, GlobalLimits, HotStatement, Lease, Plan, QueueKey, QueueSession, Resume,
};
use jobqueue_core::{JobStatus, RateLimit, RetryPolicy, set_queue_rate_limit};
use jobqueue_tests::{TestDb, autovacuum_off, exec, scalar};

/// Jobs per batch statement.
const BATCH: usize = 1000;

/// A database whose jobs table autovacuum leaves alone, so its statistics
/// stay what each test makes them.
fn frozen_stats_db() -> (TestDb, PgConnection) {
    let (db, mut conn) = TestDb::connected();
    autovacuum_off(&mut conn);
    (db, conn)
}

/// Inserts `n` rows in `status` of queue `queue`, due now.
fn insert(conn: &mut PgConnection, n: usize, status: &str, queue: &str) {
    let held = matches!(status, "claimed" | "running");
    let finished = matches!(status, "completed" | "failed" | "cancelled");
    exec(
        conn,
        &format!(
            "INSERT INTO jobqueue_jobs (id, job_type, queue, status, run_at, priority, attempts,
                 claim_count, worker_id, claimed_at, heartbeat_at, lease_expires_at, finished_at)
             SELECT gen_random_uuid(), 'plan.job', '{queue}', '{status}', now(), 100,
                    {attempts}, {attempts}, {worker}, {at}, {at}, {lease}, {finished_at}
             FROM generate_series(1, {n})",
            attempts = if held || finished { 1 } else { 0 },
            worker = if held { "'w'" } else { "NULL" },
            at = if held { "now()" } else { "NULL" },
            lease = if held {
                "now() + interval '1 hour'"
            } else {
                "NULL"
            },
            finished_at = if finished { "now()" } else { "NULL" },
        ),
    );
}

/// `n` claimed jobs and `n` pending ones, in queue `default`.
fn backlog(conn: &mut PgConnection, n: usize) {
    insert(conn, n, "claimed", "default");
    insert(conn, n, "pending", "default");
}

/// `BATCH` leases of held jobs.
fn leases(conn: &mut PgConnection) -> Vec<Lease> {
    #[derive(QueryableByName)]
    struct Held {
        #[diesel(sql_type = diesel::sql_types::Uuid)]
        id: jobqueue_core::JobId,
        #[diesel(sql_type = diesel::sql_types::Integer)]
        claim_count: i32,
    }
    let held: Vec<Held> = diesel::sql_query(format!(
        "SELECT id, claim_count FROM jobqueue_jobs
         WHERE status IN ('claimed', 'running') LIMIT {BATCH}"
    ))
    .load(conn)
    .expect("held jobs");
    assert_eq!(held.len(), BATCH, "the state needs {BATCH} held jobs");
    held.into_iter()
        .map(|h| Lease {
            job_id: h.id,
            token: h.claim_count,
            attempt: 1,
        })
        .collect()
}

/// Every batch write on held jobs probes the primary key once per job of
/// its batch and examines nothing else.
fn assert_batch_statements_bounded(state: &str, db: &TestDb) {
    let mut conn = db.conn();
    let leases = leases(&mut conn);
    let failures: Vec<Failure> = leases
        .iter()
        .map(|lease| Failure::retry(*lease, "boom", &RetryPolicy::default()))
        .collect();
    let mut session = QueueSession::establish(&db.url).expect("session");
    let statements = [
        ("start", HotStatement::Start(&leases)),
        ("complete", HotStatement::Complete(&leases)),
        (
            "complete-and-delete",
            HotStatement::CompleteAndDelete(&leases),
        ),
        ("fail", HotStatement::Fail(&failures)),
        (
            "heartbeat",
            HotStatement::Heartbeat(&leases, Duration::from_secs(30)),
        ),
        ("release", HotStatement::Release(&leases)),
        ("cancel-held", HotStatement::CancelHeld(&leases)),
        ("park", HotStatement::Park(&leases)),
    ];
    for (name, statement) in statements {
        let plan = session.explain(statement).expect("explain");
        for read in &plan.reads {
            assert!(
                read.node == "Index Scan" && read.index.as_deref() == Some("jobqueue_jobs_pkey"),
                "{state}: {name} reads the jobs table other than by primary key ({read:?}):\n{}",
                plan.json
            );
        }
        // The fail statement locks its rows first, then updates them: two
        // probes per job.
        let probes = if name == "fail" { 2 } else { 1 };
        assert_within(state, name, &plan, (probes * BATCH) as f64);
    }
}

fn assert_within(state: &str, name: &str, plan: &Plan, most: f64) {
    assert!(
        !plan.reads.is_empty(),
        "{state}: {name} reads nothing?\n{}",
        plan.json
    );
    assert!(
        plan.rows_examined() <= most,
        "{state}: {name} examined {} rows (at most {most} expected):\n{}",
        plan.rows_examined(),
        plan.json
    );
    assert!(
        plan.join_rows_discarded <= most,
        "{state}: {name}'s joins discarded {} row pairs (at most {most} expected):\n{}",
        plan.join_rows_discarded,
        plan.json
    );
}

/// A claim of 100 from `queue` reads only that queue's range of the fetch
/// index and the claimed rows by primary key.
fn assert_claim_bounded(state: &str, db: &TestDb, claim: &Claim) {
    let mut session = QueueSession::establish(&db.url).expect("session");
    let plan = session
        .explain(HotStatement::Claim(claim))
        .expect("explain the claim");
    for read in &plan.reads {
        let index = read.index.as_deref().unwrap_or("");
        assert!(
            read.node.starts_with("Index") && index.starts_with("jobqueue_jobs_"),
            "{state}: the claim reads the jobs table without an index ({read:?}):\n{}",
            plan.json
        );
        assert!(
            index == "jobqueue_jobs_fetch_idx" || index == "jobqueue_jobs_pkey",
            "{state}: the claim reads {index}:\n{}",
            plan.json
        );
    }
    // Its own rows twice (found, then updated), plus one look per queue to
    // see whether it has due jobs (one per range when resuming); a claim
    // that honours limits looks once more at each limited queue, to lock
    // only those with due jobs.
    let queues = claim.queues.len().max(1) as f64;
    let mut looks = if claim.resume.is_empty() { 2.0 } else { 4.0 };
    if claim.global_limits == GlobalLimits::Honour {
        looks += 1.0;
    }
    assert_within(
        state,
        "claim",
        &plan,
        2.0 * claim.limit as f64 + looks * queues,
    );
}

/// `claim`, honouring limits, of `claim`'s queues with a rate limit set
/// on each (removed again after).
fn assert_limited_claim_bounded(state: &str, db: &TestDb, conn: &mut PgConnection, claim: &Claim) {
    let rate = RateLimit::new(1_000_000, Duration::from_secs(1)).expect("a rate");
    for queue in &claim.queues {
        set_queue_rate_limit(conn, queue, Some(rate)).expect("set a rate");
    }
    let limited = claim.clone().global_limits(GlobalLimits::Honour);
    assert_claim_bounded(&format!("{state}, rate-limited"), db, &limited);
    for queue in &claim.queues {
        set_queue_rate_limit(conn, queue, None).expect("remove the rate");
    }
}

/// The rows and pages the jobs table's statistics record.
fn statistics(conn: &mut PgConnection) -> (i64, i64) {
    let mut of = |column: &str| {
        scalar(
            conn,
            &format!(
                "SELECT {column}::int8 AS n FROM pg_class WHERE oid = 'jobqueue_jobs'::regclass"
            ),
        )
    };
    (of("reltuples"), of("relpages"))
}

/// The maintenance statements, in a batch of `BATCH`, examine their batch
/// and nothing else: a rescue of `BATCH` held jobs whose leases expired,
/// and a prune of `BATCH` completed jobs (both made here, last, since they
/// change the state).
fn assert_maintenance_bounded(state: &str, db: &TestDb, conn: &mut PgConnection) {
    exec(
        conn,
        &format!(
            "UPDATE jobqueue_jobs SET lease_expires_at = now() - interval '1 minute'
             WHERE id IN (SELECT id FROM jobqueue_jobs
                          WHERE lease_expires_at IS NOT NULL LIMIT {BATCH})"
        ),
    );
    insert(conn, BATCH, "completed", "default");
    let mut session = QueueSession::establish(&db.url).expect("session");
    let statements = [
        ("rescue", HotStatement::RescueStale(BATCH as i64)),
        (
            "prune",
            HotStatement::Prune {
                status: JobStatus::Completed,
                older_than: Duration::ZERO,
                limit: BATCH as i64,
            },
        ),
    ];
    for (name, statement) in statements {
        let plan = session.explain(statement).expect("explain");
        // Found by an index, then locked and written by primary key.
        assert_within(state, name, &plan, (2 * BATCH) as f64);
    }
}

/// Keys of queue `keyed` (key limit 1) with waiting jobs, each key's line
/// `LINE` long: the heads not yet looked at by an admission, the jobs
/// behind them looked at.
const KEYS: usize = BATCH;
const LINE: usize = 10;

/// Queue `keyed` with a key limit of 1 and `KEYS` lines of `LINE` waiting
/// jobs, inserted after the state's statistics were taken: rows they do
/// not know of.
fn key_lines(conn: &mut PgConnection) {
    exec(
        conn,
        "INSERT INTO jobqueue_queues (name, key_limit) VALUES ('keyed', 1)",
    );
    exec(
        conn,
        &format!(
            "INSERT INTO jobqueue_jobs (id, job_type, queue, status, run_at, priority,
                 concurrency_key, key_checked)
             SELECT gen_random_uuid(), 'plan.job', 'keyed', 'waiting', now(), 100,
                    'k' || (i % {KEYS}), CASE WHEN i >= {KEYS} THEN true END
             FROM generate_series(0, {} - 1) AS i
             ORDER BY i",
            KEYS * LINE
        ),
    );
}

/// The admission statements read a head or a line's first job per key,
/// and write by primary key, whatever the statistics say: 1,000 to 2,000
/// rows here, never the 10,000 waiting jobs (a walk of them).
fn assert_admissions_bounded(state: &str, db: &TestDb, conn: &mut PgConnection) {
    let keys: Vec<QueueKey> = (0..KEYS)
        .map(|i| QueueKey {
            queue: "keyed".into(),
            key: format!("k{i}"),
        })
        .collect();
    let behind: Vec<jobqueue_core::JobId> = diesel::sql_query(format!(
        "SELECT id FROM jobqueue_jobs WHERE status = 'waiting' AND key_checked LIMIT {BATCH}"
    ))
    .load::<IdRow>(conn)
    .expect("waiting jobs")
    .into_iter()
    .map(|row| row.id)
    .collect();
    let mut session = QueueSession::establish(&db.url).expect("session");
    let statements = [
        (
            "admission of new jobs",
            HotStatement::AdmitNewRead {
                queues: &[],
                limit: BATCH as i64,
            },
        ),
        (
            "keys with waiting jobs",
            HotStatement::KeysWithWaiting(&keys),
        ),
        ("admission of keys", HotStatement::AdmitKeys(&keys)),
        ("marking looked-at jobs", HotStatement::MarkChecked(&behind)),
    ];
    for (name, statement) in statements {
        let plan = session.explain(statement).expect("explain");
        assert_within(state, name, &plan, (3 * BATCH) as f64);
    }
}

#[derive(QueryableByName)]
struct IdRow {
    #[diesel(sql_type = diesel::sql_types::Uuid)]
    id: jobqueue_core::JobId,
}

/// Builds a table state with `prepare` (on a database whose statistics
/// stay as it leaves them), then checks the plans of every batch statement,
/// of a claim of 100, and of the maintenance statements in that state.
fn check_state(state: &str, prepare: impl FnOnce(&mut PgConnection)) {
    let (db, mut conn) = frozen_stats_db();
    prepare(&mut conn);
    key_lines(&mut conn);
    // The runner's statements are prepared: PostgreSQL plans them for
    // their values at first, then may switch to a generic plan that knows
    // none (the length of the id array included). Both must stay bounded.
    for plans in ["custom", "generic"] {
        if plans == "generic" {
            let name: String = diesel::select(diesel::dsl::sql::<diesel::sql_types::Text>(
                "current_database()",
            ))
            .get_result(&mut conn)
            .expect("database name");
            exec(
                &mut conn,
                &format!("ALTER DATABASE \"{name}\" SET plan_cache_mode = force_generic_plan"),
            );
        }
        let state = &format!("{state}, {plans} plans");
        assert_batch_statements_bounded(state, &db);
        let claim = Claim::new("plan-test")
            .limit(100)
            .queues(["default"])
            .global_limits(GlobalLimits::Skip);
        assert_claim_bounded(state, &db, &claim);
        // The same claim resuming in the queue (at a point every job sorts
        // after): its three ranges, and the look for due jobs in each.
        let resuming = claim.clone().resume_at([Resume {
            queue: "default".into(),
            priority: 100,
            run_at: chrono::DateTime::UNIX_EPOCH,
            id: uuid::Uuid::nil().into(),
        }]);
        assert_claim_bounded(state, &db, &resuming);
        // The claim that locks a rate-limited queue's row first, and notes
        // its starts.
        assert_limited_claim_bounded(state, &db, &mut conn, &claim);
        assert_admissions_bounded(state, &db, &mut conn);
    }
    assert_maintenance_bounded(&format!("{state}, generic plans"), &db, &mut conn);
}

#[test]
fn fresh_table_never_analyzed() {
    check_state("fresh table", |conn| backlog(conn, 5_000));
}

#[test]
fn after_truncate() {
    check_state("after TRUNCATE", |conn| {
        insert(conn, 20_000, "completed", "default");
        exec(conn, "ANALYZE jobqueue_jobs");
        exec(conn, "TRUNCATE jobqueue_jobs");
        backlog(conn, 20_000);
    });
}

#[test]
fn statistics_claim_the_table_is_empty() {
    check_state("statistics say empty", |conn| {
        exec(conn, "ANALYZE jobqueue_jobs");
        backlog(conn, 30_000);
        assert_eq!(
            statistics(conn).0,
            0,
            "the statistics should still describe the empty table"
        );
    });
}

#[test]
fn statistics_taken_while_every_row_was_dead() {
    // The state a runner that deletes completed jobs leaves under a long
    // transaction: ANALYZE finds pages full of deleted rows and none live
    // (reltuples 0 over many pages), so the planner takes the table for
    // empty; a batch statement that then walked the whole primary key,
    // dead entries included, took seconds per statement in the soak.
    check_state("statistics of dead rows only", |conn| {
        insert(conn, 50_000, "completed", "default");
        exec(conn, "DELETE FROM jobqueue_jobs");
        exec(conn, "ANALYZE jobqueue_jobs");
        backlog(conn, 30_000);
        let (rows, pages) = statistics(conn);
        assert!(
            rows == 0 && pages > 0,
            "the statistics should count no live row over many pages"
        );
    });
}

#[test]
fn statistics_taken_before_the_backlog_was_claimed() {
    // The state that made completions take seconds: analyzed while every
    // job was pending, then most of them claimed at once.
    check_state("stale statistics, backlog claimed", |conn| {
        insert(conn, 50_000, "pending", "default");
        exec(conn, "ANALYZE jobqueue_jobs");
        exec(
            conn,
            "UPDATE jobqueue_jobs SET status = 'claimed', worker_id = 'w', attempts = 1,
                 claim_count = 1, claimed_at = now(), heartbeat_at = now(),
                 lease_expires_at = now() + interval '1 hour'
             WHERE id IN (SELECT id FROM jobqueue_jobs LIMIT 47000)",
        );
    });
}

#[test]
fn a_million_rows() {
    check_state("1,000,000 rows", |conn| {
        insert(conn, 900_000, "completed", "default");
        backlog(conn, 50_000);
        exec(conn, "ANALYZE jobqueue_jobs");
    });
}

#[test]
fn claims_examine_nothing_of_other_queues_future_jobs_or_unhandled_types() {
    let (db, mut conn) = frozen_stats_db();
    insert(&mut conn, 1_000, "pending", "q1");
    // In the way of a claim from q1 with the former (priority, run_at) index:
    insert(&mut conn, 50_000, "pending", "q0");
    insert(&mut conn, 50_000, "unhandled", "q1");
    exec(
        &mut conn,
        "INSERT INTO jobqueue_jobs (id, job_type, queue, status, run_at, priority)
         SELECT gen_random_uuid(), 'plan.job', 'q1', 'scheduled',
                now() + interval '1 day', 900
         FROM generate_series(1, 50000)",
    );
    exec(&mut conn, "ANALYZE jobqueue_jobs");
    let q1 = Claim::new("plan-test").limit(100).queues(["q1"]);
    assert_claim_bounded("other queues' backlogs", &db, &q1);
    assert_limited_claim_bounded("other queues' backlogs", &db, &mut conn, &q1);
    // Several queues at once: each queue's share from its own range.
    let both = Claim::new("plan-test").limit(100).queues(["q0", "q1"]);
    assert_claim_bounded("two queues", &db, &both);
    // Every queue: one index descent per queue to find them.
    let any = Claim::new("plan-test").limit(100);
    assert_claim_bounded("every queue", &db, &any);
}

#[test]
fn a_rate_limited_claim_over_many_queues_never_pairs_each_job_with_each_queue() {
    // A claim of every tenant's queue at once, each tenant rate-limited:
    // 100 queues, 10 jobs each, all 1,000 claimed in one statement. Its
    // joins between its queues are bounded by the queues (at most 100 a
    // claim); one between the claimed jobs and the locked queues would
    // discard 99,000 pairs.
    const QUEUES: usize = 100;
    let (db, mut conn) = frozen_stats_db();
    let names: Vec<String> = (0..QUEUES).map(|i| format!("tenant-{i:03}")).collect();
    for name in &names {
        insert(&mut conn, 10, "pending", name);
    }
    exec(&mut conn, "ANALYZE jobqueue_jobs");
    let rate = RateLimit::new(1_000_000, Duration::from_secs(1)).expect("a rate");
    for name in &names {
        set_queue_rate_limit(&mut conn, name, Some(rate)).expect("set a rate");
    }
    let claim = Claim::new("plan-test")
        .limit((QUEUES * 10) as i64)
        .queues(names.iter().cloned())
        .global_limits(GlobalLimits::Honour);
    let mut session = QueueSession::establish(&db.url).expect("session");
    let plan = session
        .explain(HotStatement::Claim(&claim))
        .expect("explain the claim");
    assert!(
        plan.rows_examined() >= (QUEUES * 10) as f64,
        "the claim should reach every job of every queue:\n{}",
        plan.json
    );
    let queue_pairs = (QUEUES * QUEUES) as f64;
    assert!(
        plan.join_rows_discarded <= 3.0 * queue_pairs,
        "the claim's joins discarded {} row pairs (at most 3 × {queue_pairs} for its queues \
         expected; a join of each job with each queue discards {}):\n{}",
        plan.join_rows_discarded,
        (QUEUES * 10 * (QUEUES - 1)) as f64,
        plan.json
    );
}

/// Whether executing `query` on `conn` compiled it (the `JIT` section of
/// its executed plan).
fn compiled(conn: &mut PgConnection, query: &str) -> bool {
    #[derive(QueryableByName)]
    struct Line {
        #[diesel(sql_type = diesel::sql_types::Text, column_name = "QUERY PLAN")]
        line: String,
    }
    let lines: Vec<Line> = diesel::sql_query(format!("EXPLAIN (ANALYZE, FORMAT TEXT) {query}"))
        .load(conn)
        .unwrap_or_else(|e| panic!("{e}\n{query}"));
    lines.iter().any(|l| l.line.starts_with("JIT:"))
}

/// A plan left with a ruled-out node (a sequential scan of a table with no
/// index on the column asked about) costs over 10^10, past every JIT
/// threshold: a queue session compiles nothing all the same, where a
/// connection with only the planner settings compiles it on every run.
#[test]
fn a_queue_session_never_compiles_a_statement() {
    let db = TestDb::new();
    let query = "SELECT EXISTS (SELECT 1 FROM jobqueue_queues WHERE global_limit IS NOT NULL)";
    let mut plain = db.conn();
    exec(&mut plain, "SET enable_seqscan = off");
    let jit_available = scalar(&mut plain, "SELECT pg_jit_available()::int::int8 AS n") == 1;
    if jit_available {
        assert!(
            compiled(&mut plain, query),
            "the server has JIT, yet a plan costed past jit_above_cost was not compiled: \
             the check below would prove nothing"
        );
    } else {
        eprintln!("this server cannot JIT-compile: only the session's setting is checked");
    }
    let mut session = QueueSession::establish(&db.url).expect("session");
    assert!(
        !compiled(session.conn(), query),
        "a queue session compiled a one-row statement"
    );
    let jit: String = diesel::select(diesel::dsl::sql::<diesel::sql_types::Text>(
        "current_setting('jit')",
    ))
    .get_result(session.conn())
    .expect("jit setting");
    assert_eq!(jit, "off");
}

/// Inserts workflow `workflow` (id text) with `parents` held steps and
/// `children` blocked ones, every parent before every child; returns the
/// parents' leases.
fn held_workflow(
    conn: &mut PgConnection,
    workflow: &str,
    parents: usize,
    children: usize,
) -> Vec<jobqueue_core::engine::StepDone> {
    exec(
        conn,
        &format!("INSERT INTO jobqueue_workflows (id, name) VALUES ('{workflow}', 'plan')"),
    );
    let jobs = |n: usize, status: &str, role: &str| {
        let held = status == "claimed";
        format!(
            "INSERT INTO jobqueue_jobs (id, job_type, queue, status, run_at, attempts, claim_count,
                 worker_id, claimed_at, lease_expires_at, workflow_id, current_stage)
             SELECT gen_random_uuid(), 'plan.job', 'default', '{status}', now(), {a}, {a}, {w},
                    {at}, {lease}, '{workflow}', '{role}'
             FROM generate_series(1, {n})",
            a = if held { 1 } else { 0 },
            w = if held { "'w'" } else { "NULL" },
            at = if held { "now()" } else { "NULL" },
            lease = if held {
                "now() + interval '1 hour'"
            } else {
                "NULL"
            },
        )
    };
    exec(conn, &jobs(parents, "claimed", "parent"));
    exec(conn, &jobs(children, "blocked", "child"));
    exec(
        conn,
        &format!(
            "INSERT INTO jobqueue_workflow_steps (job_id, workflow_id, name, job_type, parents_left)
             SELECT id, workflow_id, id::text, job_type,
                    CASE WHEN current_stage = 'child' THEN {parents} ELSE 0 END
             FROM jobqueue_jobs WHERE workflow_id = '{workflow}'"
        ),
    );
    exec(
        conn,
        &format!(
            "INSERT INTO jobqueue_workflow_edges (parent_id, child_id, workflow_id)
             SELECT p.id, c.id, p.workflow_id
             FROM jobqueue_jobs AS p JOIN jobqueue_jobs AS c ON c.workflow_id = p.workflow_id
             WHERE p.workflow_id = '{workflow}'
               AND p.current_stage = 'parent' AND c.current_stage = 'child'"
        ),
    );
    #[derive(QueryableByName)]
    struct Held {
        #[diesel(sql_type = diesel::sql_types::Uuid)]
        id: jobqueue_core::JobId,
    }
    diesel::sql_query(format!(
        "SELECT id FROM jobqueue_jobs WHERE workflow_id = '{workflow}' AND status = 'claimed'"
    ))
    .load::<Held>(conn)
    .expect("held steps")
    .into_iter()
    .map(|h| {
        jobqueue_core::engine::StepDone::new(Lease {
            job_id: h.id,
            token: 1,
            attempt: 1,
        })
    })
    .collect()
}

/// A workflow job's completion reads its own steps, their edges and the
/// children they release, never the rest of the steps table: with
/// statistics that call the workflow tables empty and 20,000 other steps
/// waiting, a fan-in of 1,000 parents and a fan-out of one parent to 1,000
/// children each examine about 3,000 rows.
#[test]
fn workflow_completions_read_their_own_steps_edges_and_children() {
    let (db, mut conn) = frozen_stats_db();
    for table in ["jobqueue_workflow_steps", "jobqueue_workflow_edges"] {
        exec(
            &mut conn,
            &format!("ALTER TABLE {table} SET (autovacuum_enabled = false)"),
        );
    }
    exec(
        &mut conn,
        "ANALYZE jobqueue_jobs, jobqueue_workflow_steps, jobqueue_workflow_edges",
    );
    held_workflow(&mut conn, "00000000-0000-7000-8000-000000000001", 0, 20_000);
    let fan_in = held_workflow(&mut conn, "00000000-0000-7000-8000-000000000002", 1000, 1);
    let fan_out = held_workflow(&mut conn, "00000000-0000-7000-8000-000000000003", 1, 1000);
    let mut session = QueueSession::establish(&db.url).expect("session");
    for (name, done) in [("fan-in", &fan_in), ("fan-out", &fan_out)] {
        for delete in [true, false] {
            let plan = session
                .explain(HotStatement::CompleteSteps { done, delete })
                .expect("explain");
            for read in &plan.reads {
                assert!(
                    read.node == "Index Scan",
                    "{name}: a read other than an index scan ({read:?}):\n{}",
                    plan.json
                );
            }
            assert_within(
                "statistics that call the workflow tables empty",
                name,
                &plan,
                3_100.0,
            );
        }
    }
}
