//! A runner's maintenance services, one pass at a time: each `run_once` on
//! a scratch database, checked by the report it returns; the horizon
//! reading they go by; and one runner whose scheduler runs them.

use std::time::Duration;

use diesel::{PgConnection, RunQueryDsl as _};
use jobqueue_core::engine::{Claim, Holder, Horizon};
use jobqueue_runner::maintenance::{
    GaugesReport, IndexUpkeep, Kept, Promote, Prune, QueueGauges, Reclaim, Rescue, Service,
    ServiceContext, Upkeep, Vacuum, VacuumReport,
};
use jobqueue_runner::{MetricsMode, Runner, RunnerConfig};
use jobqueue_tests::{
    TestDb, autovacuum_off, count_where, enqueue_all, exec, expire_leases, scalar, wait_for,
};
use jobqueue_tools::bench::{BenchNoop, registry};

const FETCH_INDEX: &str = "jobqueue_jobs_fetch_idx";

/// A context for passes on `db`, configured by `configure`.
fn context(db: &TestDb, configure: impl FnOnce(&mut RunnerConfig)) -> ServiceContext {
    let mut config = RunnerConfig::new(&db.url);
    configure(&mut config);
    ServiceContext::new(config, registry()).expect("a service context")
}

/// A database whose jobs table only the passes here vacuum (autovacuum
/// off), a connection to it, and a context for passes whose vacuums need
/// `min_dead` dead rows.
fn vacuumed_by_passes_only(min_dead: i64) -> (TestDb, PgConnection, ServiceContext) {
    let db = TestDb::new();
    let mut conn = db.conn();
    autovacuum_off(&mut conn);
    let cx = context(&db, |config| config.vacuum_min_dead = min_dead);
    (db, conn, cx)
}

/// Opens, on `conn`, a `REPEATABLE READ` transaction whose snapshot pins
/// the xmin horizon (it reads no jobs table, so it locks nothing there);
/// returns its session's pid.
fn pin(conn: &mut PgConnection) -> i64 {
    exec(
        conn,
        "BEGIN ISOLATION LEVEL REPEATABLE READ; SELECT count(*) FROM jobqueue_queues",
    );
    scalar(conn, "SELECT pg_backend_pid()::int8 AS n")
}

/// The pid of the session `horizon` names, if a session holds it.
fn holder_pid(horizon: &Horizon) -> Option<i64> {
    match &horizon.pin()?.holder {
        Holder::Session(session) => Some(i64::from(session.pid)),
        _ => None,
    }
}

#[test]
fn promote_moves_due_scheduled_jobs_and_says_how_many() {
    let db = TestDb::new();
    let mut conn = db.conn();
    let mut cx = context(&db, |_| {});
    let mut promote = Promote::new(cx.config());
    enqueue_all(&mut conn, (0..5).map(|seq| BenchNoop { seq }));
    exec(
        &mut conn,
        "UPDATE jobqueue_jobs SET status = 'scheduled', run_at = now() + interval '1 hour'",
    );
    assert_eq!(
        promote.run_once(&mut cx).expect("pass").jobs,
        0,
        "none due yet"
    );
    exec(
        &mut conn,
        "UPDATE jobqueue_jobs SET run_at = now() - interval '1 second'",
    );
    let promoted = promote.run_once(&mut cx).expect("pass");
    assert_eq!(promoted.jobs, 5, "{promoted}");
    assert_eq!(count_where(&mut conn, "status = 'pending'"), 5);
    assert_eq!(promote.run_once(&mut cx).expect("pass").jobs, 0);
}

#[test]
fn rescue_recovers_expired_leases_and_reclaim_takes_back_unhandled_jobs() {
    let db = TestDb::new();
    let mut conn = db.conn();
    let mut cx = context(&db, |_| {});
    enqueue_all(&mut conn, (0..4).map(|seq| BenchNoop { seq }));
    jobqueue_core::engine::claim(&mut conn, &Claim::new("gone").limit(3)).expect("claim");
    let mut rescue = Rescue::new(cx.config());
    assert_eq!(rescue.run_once(&mut cx).expect("pass").total(), 0);
    expire_leases(&mut conn);
    let rescued = rescue.run_once(&mut cx).expect("pass");
    assert_eq!((rescued.requeued, rescued.failed), (3, 0), "{rescued}");
    assert_eq!(count_where(&mut conn, "status = 'pending'"), 4);

    // Set aside by a runner that did not handle the type; this one does.
    exec(&mut conn, "UPDATE jobqueue_jobs SET status = 'unhandled'");
    let reclaimed = Reclaim::new(cx.config()).run_once(&mut cx).expect("pass");
    assert_eq!(reclaimed.jobs, 4, "{reclaimed}");
    assert_eq!(count_where(&mut conn, "status = 'pending'"), 4);
}

#[test]
fn prune_deletes_finished_jobs_past_their_retention() {
    let db = TestDb::new();
    let mut conn = db.conn();
    let mut cx = context(&db, |config| {
        config.retention.completed = Some(Duration::from_secs(3600));
    });
    enqueue_all(&mut conn, (0..6).map(|seq| BenchNoop { seq }));
    exec(
        &mut conn,
        "UPDATE jobqueue_jobs SET status = 'completed',
                finished_at = now() - CASE WHEN id IN (SELECT id FROM jobqueue_jobs LIMIT 2)
                                           THEN interval '1 minute' ELSE interval '2 hours' END",
    );
    let pruned = Prune::new(cx.config()).run_once(&mut cx).expect("pass");
    assert_eq!(
        (pruned.pruned.completed, pruned.pruned.failed),
        (4, 0),
        "{pruned}"
    );
    assert_eq!(count_where(&mut conn, "status = 'completed'"), 2);
}

/// While a transaction pins the horizon a vacuum removes little, and says
/// who pins it; the next pass only looks at the horizon (the same holder:
/// no vacuum); once the pin ends, the next pass sees it gone and vacuums.
#[test]
fn the_vacuum_names_the_pin_it_waits_for_and_vacuums_once_it_ends() {
    let (db, mut conn, mut cx) = vacuumed_by_passes_only(50);
    let mut vacuum = Vacuum::new(cx.config());
    let mut holder = db.conn();
    let pinned_by = pin(&mut holder);
    enqueue_all(&mut conn, (0..300).map(|seq| BenchNoop { seq }));
    exec(
        &mut conn,
        "DELETE FROM jobqueue_jobs; SELECT pg_stat_force_next_flush()",
    );

    let report = vacuum.run_once(&mut cx).expect("pass");
    let VacuumReport::Vacuumed { vacuumed, held, .. } = &report else {
        panic!("no vacuum: {report}");
    };
    assert!(vacuumed.reclaimed_little(), "{report}");
    let held = held.as_ref().expect("the horizon read after");
    assert_eq!(holder_pid(held), Some(pinned_by), "{report}");
    assert!(
        report
            .to_string()
            .contains(&format!("pinned by pid {pinned_by}")),
        "{report}"
    );

    let report = vacuum.run_once(&mut cx).expect("pass");
    let VacuumReport::StillHeld { horizon, .. } = &report else {
        panic!("not a look at the horizon: {report}");
    };
    assert_eq!(holder_pid(horizon), Some(pinned_by), "{report}");

    exec(&mut holder, "COMMIT");
    let report = vacuum.run_once(&mut cx).expect("pass");
    let VacuumReport::Vacuumed { vacuumed, held, .. } = &report else {
        panic!("no vacuum once the pin ended: {report}");
    };
    assert!(!vacuumed.reclaimed_little(), "{report}");
    assert_eq!(*held, None, "{report}");
}

/// One runner at a time computes the queue gauges: the first to pass takes
/// the lead, another runner's pass follows.
#[test]
fn one_runner_leads_the_queue_gauges() {
    let db = TestDb::new();
    let keep = |config: &mut RunnerConfig| config.metrics = MetricsMode::Keep;
    let (mut first, mut second) = (context(&db, keep), context(&db, keep));
    let mut leader = QueueGauges::new(first.config());
    let mut follower = QueueGauges::new(second.config());
    enqueue_all(&mut db.conn(), (0..3).map(|seq| BenchNoop { seq }));
    let report = leader.run_once(&mut first).expect("pass");
    assert_eq!(
        report,
        GaugesReport::Leading {
            queues: 1,
            took_the_lead: true
        }
    );
    assert_eq!(
        follower.run_once(&mut second).expect("pass"),
        GaugesReport::Following
    );
    let again = leader.run_once(&mut first).expect("pass");
    assert!(
        matches!(
            again,
            GaugesReport::Leading {
                took_the_lead: false,
                ..
            }
        ),
        "{again}"
    );
}

/// The claim index after a pinned horizon: while the pin holds, index
/// upkeep leaves it and names the pin; once it ended and a vacuum removed
/// the dead entries, upkeep rebuilds it to a fraction of its size.
#[test]
fn index_upkeep_rebuilds_the_claim_index_a_pin_bloated_once_the_pin_ends() {
    let (db, mut conn, mut cx) = vacuumed_by_passes_only(1);
    let mut upkeep = IndexUpkeep::new(cx.config()).min_bytes(1 << 20);
    let mut holder = db.conn();
    let pinned_by = pin(&mut holder);
    // Jobs come and go, claimed and deleted as they complete; with the
    // horizon pinned, every one leaves its entry in the claim index.
    for round in 0..6 {
        enqueue_all(&mut conn, (0..10_000).map(|seq| BenchNoop { seq }));
        let claimed =
            jobqueue_core::engine::claim(&mut conn, &Claim::new("w").limit(10_000)).expect("claim");
        let leases: Vec<_> = claimed.iter().map(|row| row.lease()).collect();
        jobqueue_core::engine::complete_and_delete_many(&mut conn, &leases).expect("complete");
        assert_eq!(claimed.len(), 10_000, "round {round}");
    }
    enqueue_all(&mut conn, (0..100).map(|seq| BenchNoop { seq }));
    // What autovacuum's analyze would count: the live entries.
    exec(&mut conn, "ANALYZE jobqueue_jobs");
    let bloated = scalar(
        &mut conn,
        "SELECT pg_relation_size('jobqueue_jobs_fetch_idx') AS n",
    );
    assert!(bloated > 2 << 20, "the claim index is {bloated} bytes");

    // Pinned since before the claims: left as it is, saying by whom.
    let mut report = None;
    wait_for("upkeep to see the pin", Duration::from_secs(30), || {
        let pass = upkeep.run_once(&mut cx).expect("pass");
        let pinned = matches!(
            &pass.index(FETCH_INDEX).expect("the claim index").upkeep,
            Upkeep::Kept(Kept::Pinned(_))
        );
        report = Some(pass);
        pinned
    });
    let report = report.expect("a pass");
    let fetch = report.index(FETCH_INDEX).expect("the claim index");
    assert!(
        fetch
            .to_string()
            .contains(&format!("pinned by pid {pinned_by}")),
        "{report}"
    );
    assert!(fetch.before.bloat().expect("estimated") >= 4.0, "{report}");

    exec(&mut holder, "COMMIT");
    // The vacuum that follows the pin removes the dead entries (and counts
    // the live ones); upkeep then rebuilds.
    let vacuumed = Vacuum::new(cx.config()).run_once(&mut cx).expect("vacuum");
    assert!(
        matches!(vacuumed, VacuumReport::Vacuumed { .. }),
        "{vacuumed}"
    );
    let report = upkeep.run_once(&mut cx).expect("pass");
    let fetch = report.index(FETCH_INDEX).expect("the claim index");
    let Upkeep::Rebuilt { after_bytes, .. } = fetch.upkeep else {
        panic!("not rebuilt: {report}");
    };
    eprintln!("{report}");
    assert_eq!(fetch.before.bytes, bloated, "{report}");
    assert!(after_bytes * 4 <= bloated, "{report}");
    assert_eq!(
        scalar(
            &mut conn,
            "SELECT pg_relation_size('jobqueue_jobs_fetch_idx') AS n"
        ),
        after_bytes
    );
    // Valid, with no copy left behind, and the claim reads it.
    assert_eq!(
        scalar(
            &mut conn,
            "SELECT count(*) AS n FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid
             WHERE c.relname LIKE 'jobqueue_jobs_fetch_idx%' AND i.indisvalid"
        ),
        1
    );
    let claimed =
        jobqueue_core::engine::claim(&mut conn, &Claim::new("w").limit(1_000)).expect("claim");
    assert_eq!(claimed.len(), 100);
    // Packed now: the next pass keeps it.
    let report = upkeep.run_once(&mut cx).expect("pass");
    assert!(
        matches!(
            report.index(FETCH_INDEX).expect("the claim index").upkeep,
            Upkeep::Kept(Kept::Small { .. } | Kept::Packed { .. })
        ),
        "{report}"
    );
}

/// What an interrupted rebuild leaves (an invalid `_ccnew` copy) is
/// dropped by the next pass; an index under the floor is kept, saying so.
#[test]
fn index_upkeep_drops_what_an_interrupted_rebuild_left() {
    let db = TestDb::new();
    let mut conn = db.conn();
    enqueue_all(&mut conn, (0..3).map(|seq| BenchNoop { seq }));
    // A concurrent build that fails (the queue is not unique) leaves its
    // index behind, invalid.
    let failed = diesel::sql_query(
        "CREATE UNIQUE INDEX CONCURRENTLY jobqueue_jobs_fetch_idx_ccnew
         ON jobqueue_jobs (queue) WHERE status = 'pending'",
    )
    .execute(&mut conn);
    assert!(failed.is_err());
    let mut cx = context(&db, |_| {});
    let report = IndexUpkeep::new(cx.config())
        .run_once(&mut cx)
        .expect("pass");
    assert_eq!(
        report.leftovers_dropped,
        ["jobqueue_jobs_fetch_idx_ccnew"],
        "{report}"
    );
    assert!(
        matches!(
            report.index(FETCH_INDEX).expect("the claim index").upkeep,
            Upkeep::Kept(Kept::Small { .. })
        ),
        "{report}"
    );
    assert_eq!(
        scalar(
            &mut conn,
            "SELECT count(*) AS n FROM pg_class WHERE relname = 'jobqueue_jobs_fetch_idx_ccnew'"
        ),
        0
    );
}

/// A runner's scheduler runs the services on their own intervals: with
/// recovery and pruning a minute away, the vacuum still runs every 100 ms
/// once enough dead row versions have piled up.
#[test]
fn a_runner_schedules_the_vacuum_on_its_own_interval() {
    let db = TestDb::new();
    let mut conn = db.conn();
    enqueue_all(&mut conn, (0..300).map(|_| BenchNoop { seq: 0 }));
    let mut config = RunnerConfig::new(&db.url).keep_completed(jobqueue_tests::KEEP_COMPLETED);
    config.rescue_interval = Duration::from_secs(60);
    config.prune_interval = Duration::from_secs(60);
    config.vacuum_interval = Duration::from_millis(100);
    config.vacuum_min_dead = 50;
    let runner = Runner::new(config, registry()).start().expect("start");
    wait_for("the jobs done", Duration::from_secs(30), || {
        count_where(&mut conn, "status = 'completed'") == 300
    });
    // Dead row versions reach the statistics when the runner's sessions
    // report them (within about 10 s of going idle).
    wait_for(
        "the runner to vacuum the jobs table",
        Duration::from_secs(40),
        || {
            scalar(
                &mut conn,
                "SELECT count(*) AS n FROM pg_stat_user_tables
             WHERE relname = 'jobqueue_jobs' AND last_vacuum IS NOT NULL",
            ) == 1
        },
    );
    runner.shutdown();
}

/// A vacuum shortens the jobs table by its empty end only when asked
/// (the runners ask at most every five minutes): autovacuum and the
/// ordinary maintenance vacuum leave the pages for new rows, since taking
/// them away locks out every claim.
#[test]
fn a_vacuum_shortens_the_table_only_when_asked_to() {
    let db = TestDb::new();
    let mut conn = db.conn();
    let size = |conn: &mut PgConnection| {
        scalar(conn, "SELECT pg_relation_size('jobqueue_jobs') / 8192 AS n")
    };
    enqueue_all(&mut conn, (0..20_000).map(|seq| BenchNoop { seq }));
    let full = size(&mut conn);
    assert!(full > 100, "{full} pages");
    diesel::sql_query("DELETE FROM jobqueue_jobs")
        .execute(&mut conn)
        .expect("delete");

    let mut session = jobqueue_core::engine::QueueSession::establish(&db.url).expect("session");
    let vacuumed = session.vacuum_if_needed(0, false).expect("vacuum");
    assert!(vacuumed.is_some(), "the vacuum did not run");
    assert_eq!(
        size(&mut conn),
        full,
        "a vacuum not asked to shortened the table"
    );
    // Autovacuum follows the table's setting: no truncation either.
    diesel::sql_query("VACUUM jobqueue_jobs")
        .execute(&mut conn)
        .expect("plain vacuum");
    assert_eq!(size(&mut conn), full, "a plain VACUUM shortened the table");

    // Asked to, it shortens the empty table: at once, or, while another
    // test's transaction holds the horizon back (the suite's tests share
    // a server), once that transaction ends.
    wait_for(
        "a vacuum asked to shorten the empty table",
        Duration::from_secs(120),
        || {
            session.vacuum_if_needed(0, true).expect("vacuum");
            size(&mut conn) == 0
        },
    );
}

/// The horizon reading names the snapshot of a transaction that pins the
/// horizon (its session's pid, since when), the same while it stays open,
/// and none once it ends; a pin in another database (older still) is not
/// this database's horizon.
#[test]
fn the_xmin_horizon_names_its_holder_until_it_ends() {
    /// Opens a `REPEATABLE READ` transaction on `conn` and returns its
    /// snapshot's xmin and its session's pid.
    fn pin_xmin(conn: &mut PgConnection) -> (i64, i64) {
        diesel::sql_query("BEGIN ISOLATION LEVEL REPEATABLE READ")
            .execute(conn)
            .expect("begin");
        let xmin = scalar(
            conn,
            "SELECT backend_xmin::text::int8 AS n FROM pg_stat_activity WHERE pid = pg_backend_pid()",
        );
        (xmin, scalar(conn, "SELECT pg_backend_pid()::int8 AS n"))
    }
    let (db, other) = (TestDb::new(), TestDb::new());
    let mut session = jobqueue_core::engine::QueueSession::establish(&db.url).expect("session");
    let mut elsewhere = other.conn();
    pin_xmin(&mut elsewhere);
    // Nothing of this database holds its horizon (this session's own look
    // does not count).
    assert_eq!(session.xmin_horizon().expect("look"), Horizon::Free);
    let mut here = db.conn();
    let (here_xmin, here_pid) = pin_xmin(&mut here);
    let horizon = session.xmin_horizon().expect("look");
    assert_eq!(horizon.xid(), Some(here_xmin), "{horizon}");
    assert_eq!(holder_pid(&horizon), Some(here_pid), "{horizon}");
    let pinned = horizon.pin().expect("pinned");
    match &pinned.holder {
        Holder::Session(s) => {
            assert!(!s.by_transaction, "{horizon}");
            assert_eq!(s.state, "idle in transaction", "{horizon}");
        }
        other => panic!("held by {other}"),
    }
    assert!(
        pinned.since.is_some() && pinned.held_for.is_some(),
        "{horizon}"
    );
    assert!(
        horizon
            .to_string()
            .starts_with(&format!("pinned by pid {here_pid} (")),
        "{horizon}"
    );
    // Sessions come and go; the pin stays the oldest.
    enqueue_all(&mut db.conn(), (0..10).map(|_| BenchNoop { seq: 0 }));
    assert_eq!(session.xmin_horizon().expect("look").xid(), Some(here_xmin));
    exec(&mut here, "COMMIT");
    assert_eq!(session.xmin_horizon().expect("look"), Horizon::Free);
    exec(&mut elsewhere, "COMMIT");
}
