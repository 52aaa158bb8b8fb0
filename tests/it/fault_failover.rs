//! Fault injection, the primary goes away and a standby takes over: a
//! primary and a streaming standby of the test's own, 4 runner processes
//! and a producer (about 2,000 jobs/s) pointed at both through one libpq
//! multi-host URL with `target_session_attrs=read-write`. Then the primary
//!
//! - crashes (stopped in immediate mode), with synchronous replication and
//!   with asynchronous replication;
//! - is fenced (made read-only with `default_transaction_read_only`, as
//!   failover tools demote it) but stays up, listed first in the URL;
//! - freezes (every server process SIGSTOPped) and stays frozen: its
//!   connections hang instead of failing;
//!
//! and the standby is promoted. Checked job by job on the new primary:
//! every job whose enqueue was acknowledged exists and was completed once,
//! exactly-once effects are neither missing nor doubled, and the runners
//! moved to the new primary by themselves (their listeners too, and each
//! claimed jobs created after the promotion). Pickup latency after the
//! promotion, second by second, against before, is printed, not asserted:
//! how soon it is normal again depends on the machine's load, and
//! `jobqueue bench --only failover` reports it.
//!
//! Each scenario prints one summary line; run with `--nocapture` to see the
//! per-second pickup figures.
//!
//! A runner told to stop exits within its grace period plus its database
//! timeout whatever the server does: checked for every runner here, and in
//! stop cases of their own, each with a server frozen under the runner.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, mpsc};
use std::time::{Duration, Instant};

use diesel::prelude::*;
use jobqueue_core::{JobId, JobOptions, NewJob};
use jobqueue_tests::fault::{
    Frozen, OwnCluster, Proc, Standby, Summary, Tally, assert_exit_0, runner_flags,
};
use jobqueue_tests::jobs::{Chaos, Noop};
use jobqueue_tests::{count_where, scalar, wait_for, wait_no_live_jobs};
use jobqueue_tools::failover::{
    AFTER, Acked, BATCH, DONE_BEFORE, RUNNERS, TICK, listening, pickup_by_second,
    pickup_p95_lately, server_now,
};
use jobqueue_tools::postgres::StopMode;

const WORKER: &str = env!("CARGO_BIN_EXE_jobqueue-test-worker");
/// The runners' `db_timeout` and the URL's per-host connect timeout.
const DB_TIMEOUT_SECS: &str = "2";
const CONNECT_TIMEOUT_SECS: u32 = 2;
/// The runners' shutdown grace period (`runner_flags`' default).
const GRACE_SECS: f64 = 20.0;
/// How long a test waits for a runner to exit after SIGTERM before it
/// fails: long enough to measure a runner that overruns its bound.
const EXIT_WAIT: Duration = Duration::from_secs(120);
/// What a runner's exit may take beyond its grace period plus its database
/// timeout, the bound it keeps whatever the server does: the watchdog's
/// check interval, the process's own teardown, and a loaded machine.
const EXIT_MARGIN_SECS: f64 = 3.0;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Fault {
    /// `pg_ctl stop -m immediate`: the server is gone, connections refused.
    Crash,
    /// `default_transaction_read_only = on`: up, answering, refusing writes.
    Fence,
    /// SIGSTOP to every server process: connections hang.
    Freeze,
}

/// What the producer did: ids whose enqueue committed (acknowledged), and
/// ids whose enqueue failed (outcome unknown when the connection broke).
#[derive(Debug, Default)]
struct Produced {
    acked: Vec<JobId>,
    unknown: Vec<JobId>,
}

/// How long the producer waits for one batch before it gives its
/// connection up for hung (the application's own timeout: libpq has none).
const ENQUEUE_TIMEOUT: Duration = Duration::from_secs(5);

/// A thread that enqueues the batches it is sent on a connection of its
/// own through `url` (reconnecting after any error) and answers each with
/// whether it committed.
struct Enqueuer {
    batches: mpsc::Sender<Vec<NewJob>>,
    results: mpsc::Receiver<bool>,
}

impl Enqueuer {
    fn start(url: &str) -> Self {
        let (batches, batch_rx) = mpsc::channel::<Vec<NewJob>>();
        let (result_tx, results) = mpsc::channel();
        let url = url.to_owned();
        std::thread::spawn(move || {
            let mut conn: Option<PgConnection> = None;
            for batch in batch_rx {
                if conn.is_none() {
                    conn = PgConnection::establish(&url).ok();
                }
                let committed = match conn.as_mut() {
                    Some(c) => jobqueue_core::enqueue_many(c, &batch).is_ok(),
                    None => false,
                };
                if !committed {
                    conn = None;
                }
                if result_tx.send(committed).is_err() {
                    return;
                }
            }
        });
        Enqueuer { batches, results }
    }
}

/// Enqueues `BATCH` Chaos jobs (every other one exactly-once) every `TICK`
/// through `url` until `stop`. A batch not answered within
/// `ENQUEUE_TIMEOUT` (a frozen server) counts as of unknown outcome, and
/// its thread and connection are left behind for a new one.
fn produce(url: &str, stop: &AtomicBool) -> Produced {
    let mut produced = Produced::default();
    let mut enqueuer = Enqueuer::start(url);
    let mut next = Instant::now();
    let mut n = 0usize;
    while !stop.load(Ordering::Relaxed) {
        next += TICK;
        match next.checked_duration_since(Instant::now()) {
            Some(wait) => std::thread::sleep(wait),
            None => next = Instant::now(),
        }
        let batch: Vec<NewJob> = (0..BATCH)
            .map(|_| {
                n += 1;
                let job = Chaos {
                    exactly_once: n.is_multiple_of(2),
                    ms: 1,
                };
                NewJob::from_job(&job, JobOptions::new()).expect("a valid job")
            })
            .collect();
        let ids: Vec<JobId> = batch.iter().map(NewJob::id).collect();
        if enqueuer.batches.send(batch).is_err() {
            enqueuer = Enqueuer::start(url);
            continue;
        }
        match enqueuer.results.recv_timeout(ENQUEUE_TIMEOUT) {
            Ok(true) => produced.acked.extend(ids),
            Ok(false) => produced.unknown.extend(ids),
            Err(_) => {
                produced.unknown.extend(ids);
                enqueuer = Enqueuer::start(url);
            }
        }
    }
    produced
}

/// The outcome of one scenario.
struct Outcome {
    summary: Summary,
    /// Seconds from SIGTERM to each runner's exit.
    exit_secs: Vec<f64>,
    /// Runners that claimed none of the jobs created after the promotion.
    idle_after: Vec<String>,
    /// The runners, exited: their logs are printed if the test fails.
    _runners: Vec<Proc>,
}

impl Outcome {
    /// Asserts that every runner claimed jobs created after the promotion:
    /// the runners moved to the new primary, each on its own. Pickup latency
    /// is printed, not asserted: how soon it is back to normal depends on
    /// the machine (`jobqueue bench --only failover` reports it).
    fn check_every_runner_moved(&self) {
        self.summary.print_and_check();
        assert!(
            self.idle_after.is_empty(),
            "runners that claimed nothing on the new primary: {:?}; {}",
            self.idle_after,
            self.summary.line()
        );
    }
}

/// Of the runners named `names`, those whose worker id claimed none of the
/// jobs created from `promoted_at` (seconds since the epoch) on.
fn idle_after(conn: &mut PgConnection, promoted_at: f64, names: &[String]) -> Vec<String> {
    #[derive(QueryableByName)]
    struct Worker {
        #[diesel(sql_type = diesel::sql_types::Text)]
        worker_id: String,
    }
    let busy: Vec<String> = diesel::sql_query(format!(
        "SELECT DISTINCT worker_id FROM jobqueue_jobs
         WHERE EXTRACT(EPOCH FROM created_at) >= {promoted_at} AND worker_id IS NOT NULL"
    ))
    .load::<Worker>(conn)
    .expect("workers of the jobs created after the promotion")
    .into_iter()
    .map(|w| w.worker_id)
    .collect();
    names
        .iter()
        .filter(|name| !busy.contains(name))
        .cloned()
        .collect()
}

/// One scenario at a time: each loads both cores on its own.
static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn failover(name: &'static str, sync: bool, fault: Fault) -> Outcome {
    let _turn = ONE_AT_A_TIME
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let primary = OwnCluster::start();
    let standby: Standby = primary.standby("standby1");
    if sync {
        primary.require_sync("standby1");
    }
    let url = primary.failover_url(&standby, CONNECT_TIMEOUT_SECS);
    let flags = runner_flags(&[("concurrency", "16"), ("db-timeout-secs", DB_TIMEOUT_SECS)]);
    let mut runners: Vec<Proc> = (0..RUNNERS)
        .map(|i| Proc::runner(WORKER, &url, &format!("{name}-{i}"), &flags))
        .collect();
    let stop = Arc::new(AtomicBool::new(false));
    let producer = {
        let (url, stop) = (url.clone(), Arc::clone(&stop));
        std::thread::spawn(move || produce(&url, &stop))
    };
    let mut old = primary.conn();
    wait_for("all listeners", Duration::from_secs(30), || {
        listening(&mut old).expect("listeners") == RUNNERS
    });
    wait_for(
        "the load to run before the fault",
        Duration::from_secs(60),
        || count_where(&mut old, "status = 'completed'") >= DONE_BEFORE,
    );
    let before_p95 = pickup_p95_lately(&mut old).expect("pickup p95 before the fault");
    let done_before = count_where(&mut old, "status = 'completed'");
    drop(old);

    let injected = Instant::now();
    // Thawed when dropped, at the end or on a failure.
    let _frozen = (fault == Fault::Freeze).then(|| Frozen::freeze(primary.cluster()));
    match fault {
        Fault::Crash => primary
            .cluster()
            .stop(StopMode::Immediate)
            .expect("stop the primary (immediate mode)"),
        Fault::Fence => {
            let mut conn = primary.conn();
            diesel::sql_query("ALTER SYSTEM SET default_transaction_read_only = on")
                .execute(&mut conn)
                .expect("fence the primary");
            diesel::sql_query("SELECT pg_reload_conf()")
                .execute(&mut conn)
                .expect("reload");
            wait_for("the fence to take effect", Duration::from_secs(10), || {
                scalar(
                    &mut conn,
                    "SELECT count(*) AS n WHERE current_setting('default_transaction_read_only') = 'on'",
                ) == 1
            });
        }
        Fault::Freeze => {}
    }
    standby.cluster().promote().expect("promote the standby");
    let mut new = standby.conn();
    let promoted_at = server_now(&mut new).expect("the new primary's clock");
    let promote_secs = injected.elapsed().as_secs_f64();
    wait_for(
        "every runner listening on the new primary",
        Duration::from_secs(30),
        || listening(&mut new).expect("listeners") == RUNNERS,
    );
    let listeners_back_secs = injected.elapsed().as_secs_f64() - promote_secs;
    // The scenario itself: the load goes on over the window measured.
    std::thread::sleep(AFTER.saturating_sub(Duration::from_secs_f64(listeners_back_secs)));
    stop.store(true, Ordering::Relaxed);
    let produced = producer.join().expect("the producer");
    wait_no_live_jobs(&mut new, Duration::from_secs(120));

    for runner in &mut runners {
        assert!(runner.is_running(), "{} exited", runner.name());
    }
    for runner in &runners {
        runner.signal("TERM");
    }
    let signalled = Instant::now();
    let mut exit_secs = Vec::new();
    for runner in &mut runners {
        let status = runner.wait_exit(EXIT_WAIT);
        exit_secs.push(signalled.elapsed().as_secs_f64());
        assert_exit_0(runner, status);
    }
    if fault == Fault::Freeze {
        // The old primary stays frozen to the end; gone for good now.
        for pid in primary.cluster().server_pids() {
            let _ = std::process::Command::new("kill")
                .args(["-KILL", &pid.to_string()])
                .status();
        }
    }

    if std::env::var_os("FAILOVER_LOGS").is_some() {
        for runner in &runners {
            eprintln!("--- {} ---\n{}", runner.name(), runner.stderr());
        }
    }
    let acked = Acked::of(&mut new, &produced.acked).expect("check the acknowledged ids");
    let (lost_enqueues, unfinished) = (acked.missing, acked.unfinished);
    let tally = Tally::of(&mut new, "test.chaos", "attempt");
    let seconds = pickup_by_second(&mut new, promoted_at).expect("pickup by second");
    // Back to normal (see `normal_pickup_ms`) from the first second from
    // which the p95 of all later pickups is.
    let seconds_to_normal = jobqueue_tools::failover::seconds_to_normal(
        &mut new,
        promoted_at,
        before_p95,
        seconds.iter().map(|s| s.second),
    )
    .expect("pickup p95 after the promotion");
    for s in &seconds {
        eprintln!(
            "[{name}] second {:>2} after promotion: {:>5} jobs, pickup p95 {:>8.1} ms",
            s.second, s.jobs, s.p95_ms
        );
    }
    let completed_after = count_where(&mut new, "status = 'completed'") - done_before;
    let summary = Summary {
        scenario: name,
        jobs: tally.jobs,
        faults: 1,
        lost: lost_enqueues + unfinished + tally.lost(),
        duplicated: tally.duplicated(),
        detail: format!(
            "acked={} unknown_outcome={} lost_enqueues={lost_enqueues} before_p95_ms={before_p95:.1} \
             promote_s={promote_secs:.1} listeners_back_s={listeners_back_secs:.1} \
             seconds_to_normal_pickup={} completed_after_fault={completed_after} \
             at_least_once_reexecutions={} exit_s={}",
            produced.acked.len(),
            produced.unknown.len(),
            seconds_to_normal.map_or("never".to_owned(), |s| s.to_string()),
            tally.reexecutions,
            exit_secs
                .iter()
                .map(|s| format!("{s:.1}"))
                .collect::<Vec<_>>()
                .join(",")
        ),
    };
    let names: Vec<String> = runners.iter().map(|r| r.name().to_owned()).collect();
    Outcome {
        summary,
        exit_secs,
        idle_after: idle_after(&mut new, promoted_at, &names),
        _runners: runners,
    }
}

/// Synchronous replication, the primary crashes: nothing acknowledged is
/// lost, nothing done twice, and every runner works on the new primary.
#[test]
fn a_crashed_primary_loses_nothing_with_synchronous_replication() {
    failover("failover sync crash", true, Fault::Crash).check_every_runner_moved();
}

/// Asynchronous replication, the primary crashes: what was committed on
/// the primary and not yet streamed is gone. Reported, not asserted: lost
/// enqueues, and claims or completions lost with them, which run their
/// jobs again (at-least-once handlers twice for the same attempt). The
/// runners still move to the new primary and finish every job there.
#[test]
fn a_crashed_primary_with_asynchronous_replication_is_reported() {
    let outcome = failover("failover async crash", false, Fault::Crash);
    eprintln!("{}", outcome.summary.line());
}

/// The primary is fenced read-only and stays up, first in the URL: the
/// runners leave it for the promoted standby instead of retrying against it.
#[test]
fn runners_leave_a_fenced_read_only_primary() {
    failover("failover sync fence", true, Fault::Fence).check_every_runner_moved();
}

/// The primary freezes (SIGSTOP) and stays frozen: its connections hang.
/// The runners notice within their db_timeout (their listeners within the
/// quiet check), close every connection to it, handler connections
/// included, and move to the promoted standby. Pickup takes longer to
/// recover than after a crash: the frozen host is first in the URL, so
/// every new connection waits out its connect timeout there first.
///
/// A runner told to stop exits within its grace period plus its database
/// timeout whatever the server does: checked here for the failover's four
/// runners.
#[test]
fn runners_leave_a_frozen_primary() {
    let outcome = failover("failover sync freeze", true, Fault::Freeze);
    outcome.check_every_runner_moved();
    let db_timeout: f64 = DB_TIMEOUT_SECS.parse().expect("seconds");
    assert_exits_within(
        "failover sync freeze",
        &outcome.exit_secs,
        GRACE_SECS + db_timeout,
    );
}

/// A runner told to stop exits within its grace period plus its database
/// timeout whatever the server does: on a cluster of the test's own,
/// [`STOP_CASES`] runners in a row, each stopped while the cluster is
/// frozen under it (see [`stop_while_frozen`]), and one frozen in the
/// middle of its maintenance's `VACUUM`, a call with no time limit of its
/// own. Apart from the failover scenarios (and not in their turns): one
/// small runner at a time, mostly waiting.
#[test]
fn runners_stopped_on_a_frozen_server_exit_within_their_bound() {
    let db_timeout: f64 = DB_TIMEOUT_SECS.parse().expect("seconds");
    // Autovacuum off: the runner's own vacuum finds the dead rows left for it.
    let own = OwnCluster::start_with(&[("autovacuum", "off")]);
    let exit_secs: Vec<f64> = (0..STOP_CASES)
        .map(|case| stop_while_frozen(&own, case))
        .collect();
    let vacuum_secs = stop_while_vacuuming(&own);
    assert_exits_within(
        "stop while frozen",
        &exit_secs,
        STOP_GRACE_SECS + db_timeout,
    );
    assert_exits_within(
        "stop while frozen in a VACUUM",
        &[vacuum_secs],
        STOP_GRACE_SECS + db_timeout,
    );
}

/// Asserts that every exit took at most `bound` seconds (plus
/// [`EXIT_MARGIN_SECS`]), after printing them all.
fn assert_exits_within(scenario: &str, exit_secs: &[f64], bound: f64) {
    let shown: Vec<String> = exit_secs.iter().map(|s| format!("{s:.2}")).collect();
    eprintln!(
        "[{scenario}] exit after SIGTERM, s: {} (grace + db_timeout = {bound:.1} s)",
        shown.join(" ")
    );
    for (i, secs) in exit_secs.iter().enumerate() {
        assert!(
            *secs <= bound + EXIT_MARGIN_SECS,
            "[{scenario}] runner {i} took {secs:.2} s to exit after SIGTERM, over its grace \
             period plus its database timeout ({bound:.1} s); all: {}",
            shown.join(" ")
        );
    }
}

/// Stop cases run in a row (see [`stop_while_frozen`]).
const STOP_CASES: usize = 10;
/// The stop cases' runners' shutdown grace period.
const STOP_GRACE_SECS: f64 = 2.0;

/// A runner of the stop cases on `own`, as `name`.
fn stop_case_runner(own: &OwnCluster, name: &str) -> Proc {
    let grace = STOP_GRACE_SECS.to_string();
    let flags = runner_flags(&[
        ("concurrency", "8"),
        ("db-timeout-secs", DB_TIMEOUT_SECS),
        ("grace-secs", &grace),
    ]);
    Proc::runner(WORKER, &own.url, name, &flags)
}

/// Sends SIGTERM to `runner` while `frozen`, then thaws the cluster once it
/// exited; returns the seconds it took.
fn stop_frozen(mut runner: Proc, frozen: Frozen<'_>) -> f64 {
    runner.signal("TERM");
    let signalled = Instant::now();
    let status = runner.wait_exit(EXIT_WAIT);
    let secs = signalled.elapsed().as_secs_f64();
    frozen.thaw();
    assert_exit_0(&runner, status);
    secs
}

/// Stop case `case` on `own`: a runner works a load of Chaos jobs
/// (handlers on their own connections); the cluster freezes; the runner
/// gets SIGTERM, at once in even cases, in odd ones once its watchdog
/// closed a hung connection; the cluster thaws once the runner exited (the
/// jobs it held are recovered by the next case's runner). Returns the
/// seconds from SIGTERM to exit.
fn stop_while_frozen(own: &OwnCluster, case: usize) -> f64 {
    let mut conn = own.conn();
    let jobs: Vec<NewJob> = Chaos::mix(400, 20)
        .map(|job| NewJob::from_job(&job, JobOptions::new()).expect("a valid job"))
        .collect();
    jobqueue_core::enqueue_many(&mut conn, &jobs).expect("enqueue");
    let done = count_where(&mut conn, "status = 'completed'");
    let runner = stop_case_runner(own, &format!("frozen-stop-{case}"));
    wait_for("the runner at work", Duration::from_secs(30), || {
        count_where(&mut conn, "status = 'completed'") >= done + 50
    });
    let frozen = Frozen::freeze(own.cluster());
    if case % 2 == 1 {
        wait_for(
            "the runner's watchdog to close a hung connection",
            Duration::from_secs(30),
            || runner.stderr().contains("did not answer within"),
        );
    }
    let secs = stop_frozen(runner, frozen);
    eprintln!("[stop while frozen] case {case}: exited {secs:.2} s after SIGTERM");
    secs
}

/// The stop case that hung before: the cluster freezes while the runner's
/// maintenance vacuums the jobs table (200,000 dead rows, left by a
/// delete) and nothing else of the runner's waits on the server. Returns
/// the seconds from SIGTERM to exit.
fn stop_while_vacuuming(own: &OwnCluster) -> f64 {
    let mut conn = own.conn();
    for _ in 0..20 {
        let jobs: Vec<NewJob> = (0..10_000)
            .map(|n| NewJob::from_job(&Noop { n }, JobOptions::new()).expect("a valid job"))
            .collect();
        jobqueue_core::enqueue_many(&mut conn, &jobs).expect("enqueue");
    }
    diesel::sql_query("DELETE FROM jobqueue_jobs")
        .execute(&mut conn)
        .expect("delete every job");
    let runner = stop_case_runner(own, "frozen-vacuum");
    // Its first vacuum comes about `vacuum_interval` (10 s) after it starts.
    wait_for("the runner's VACUUM", Duration::from_secs(30), || {
        scalar(
            &mut conn,
            "SELECT count(*) AS n FROM pg_stat_activity \
             WHERE query LIKE 'VACUUM%' AND state = 'active'",
        ) > 0
    });
    let frozen = Frozen::freeze(own.cluster());
    let secs = stop_frozen(runner, frozen);
    eprintln!("[stop while frozen in a VACUUM] exited {secs:.2} s after SIGTERM");
    secs
}
