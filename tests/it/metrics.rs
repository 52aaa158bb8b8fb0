//! Prometheus metrics: runner processes serve what they did by queue and
//! type, one of them the table-wide queue gauges (zero-filled, with each
//! queue's limits, their use (keys held, jobs waiting on a key included)
//! and its back-off, handed on when it dies),
//! and a metrics address that cannot be bound refuses the start.

use std::time::Duration;

use diesel::RunQueryDsl;
use jobqueue_core::{
    JobOptions, KeyLimit, NewJob, RateLimit, enqueue_many, pause_queue, resume_queue,
    set_queue_key_limit, set_queue_limit, set_queue_rate_limit,
};
use jobqueue_runner::{MetricsMode, Registry, Runner, RunnerConfig};
use jobqueue_tests::fault::{Proc, runner_flags};
use jobqueue_tests::jobs::{Noop, Panic};
use jobqueue_tests::{TestDb, count_where, run_cli, wait_for, wait_no_live_jobs};
use jobqueue_tools::postgres::free_port;

const WORKER: &str = env!("CARGO_BIN_EXE_jobqueue-test-worker");

/// A runner process serving metrics on a port of its own.
struct MetricsRunner {
    proc: Proc,
    port: u16,
}

impl MetricsRunner {
    fn start(db: &TestDb, name: &str) -> Self {
        let port = free_port().expect("a free port");
        let addr = format!("127.0.0.1:{port}");
        let flags = runner_flags(&[("metrics-addr", &addr), ("metrics-refresh-secs", "0.2")]);
        let proc = Proc::runner(WORKER, &db.url, name, &flags);
        let runner = MetricsRunner { proc, port };
        wait_for("the metrics endpoint", Duration::from_secs(20), || {
            runner.try_scrape().is_some()
        });
        runner
    }

    fn try_scrape(&self) -> Option<String> {
        let url = format!("http://127.0.0.1:{}/metrics", self.port);
        let mut response = ureq::get(&url).call().ok()?;
        response.body_mut().read_to_string().ok()
    }

    fn scrape(&self) -> Scrape {
        Scrape(self.try_scrape().expect("the metrics endpoint answers"))
    }
}

/// One page of OpenMetrics text.
struct Scrape(String);

impl Scrape {
    /// The value of the series `name` whose labels include `labels`.
    fn value(&self, name: &str, labels: &[(&str, &str)]) -> Option<f64> {
        self.0.lines().find_map(|line| {
            let (series, value) = line.rsplit_once(' ')?;
            let (series_name, series_labels) = match series.split_once('{') {
                Some((n, l)) => (n, l.trim_end_matches('}')),
                None => (series, ""),
            };
            let matches = series_name == name
                && labels.iter().all(|(k, v)| {
                    series_labels
                        .split(',')
                        .any(|pair| pair == format!("{k}=\"{v}\""))
                });
            matches.then(|| value.parse().ok()).flatten()
        })
    }

    fn get(&self, name: &str, labels: &[(&str, &str)]) -> f64 {
        self.value(name, labels)
            .unwrap_or_else(|| panic!("no {name} {labels:?} in:\n{}", self.0))
    }
}

/// Enqueues `jobs` with `options`.
fn put_many<J: jobqueue_core::Job>(
    conn: &mut diesel::PgConnection,
    jobs: &[J],
    options: &JobOptions,
) {
    let new: Vec<NewJob> = jobs
        .iter()
        .map(|job| NewJob::from_job(job, options.clone()).expect("a valid job"))
        .collect();
    enqueue_many(conn, &new).expect("enqueue");
}

fn noops(n: u64) -> Vec<Noop> {
    (0..n).map(|n| Noop { n }).collect()
}

fn jobs(labels: (&'static str, &'static str)) -> [(&'static str, &'static str); 2] {
    [("queue", labels.0), ("job_type", labels.1)]
}

#[test]
fn a_runner_serves_what_it_did_by_queue_and_type_and_the_queue_gauges() {
    let (db, mut conn) = TestDb::with_side_tables();
    let runner = MetricsRunner::start(&db, "metrics-one");
    put_many(&mut conn, &noops(20), &JobOptions::new().queue("mail"));
    let panics: Vec<Panic> = (0..3).map(|_| Panic {}).collect();
    put_many(&mut conn, &panics, &JobOptions::new().queue("media"));
    wait_no_live_jobs(&mut conn, Duration::from_secs(30));
    assert_eq!(count_where(&mut conn, "status = 'failed'"), 3);

    let mail = jobs(("mail", "test.noop"));
    let media = jobs(("media", "test.panic"));
    let outcome = |labels: [(&'static str, &'static str); 2], outcome: &'static str| {
        let [q, t] = labels;
        [q, t, ("outcome", outcome)]
    };
    // The counters are final once the outcomes are written, and the queue
    // gauges follow within a refresh.
    wait_for(
        "the gauges of the drained queues",
        Duration::from_secs(10),
        || {
            let page = runner.scrape();
            page.value(
                "jobqueue_queue_jobs",
                &[("queue", "media"), ("state", "failed")],
            ) == Some(3.0)
                && page.value(
                    "jobqueue_queue_jobs",
                    &[("queue", "mail"), ("state", "due")],
                ) == Some(0.0)
        },
    );
    let page = runner.scrape();
    // Claims and outcomes by queue and type: every outcome series exists
    // from the first job on; media's jobs ran twice each, retried, then
    // failed for good.
    for (labels, claimed, completed, retried, failed) in
        [(mail, 20.0, 20.0, 0.0, 0.0), (media, 6.0, 0.0, 3.0, 3.0)]
    {
        assert_eq!(page.get("jobqueue_jobs_claimed_total", &labels), claimed);
        for (name, count) in [
            ("completed", completed),
            ("retried", retried),
            ("failed", failed),
        ] {
            let series = outcome(labels, name);
            assert_eq!(
                page.get("jobqueue_job_outcomes_total", &series),
                count,
                "{series:?}"
            );
        }
    }
    assert_eq!(page.get("jobqueue_handler_panics_total", &media), 6.0);
    assert_eq!(page.get("jobqueue_job_duration_seconds_count", &mail), 20.0);
    let queue_time = page.get("jobqueue_job_queue_time_seconds_count", &mail);
    assert_eq!(queue_time, 20.0);
    assert!(page.get("jobqueue_claim_duration_seconds_count", &[]) >= 2.0);
    assert!(page.get("jobqueue_claim_batch_size_sum", &[]) >= 26.0);
    assert_eq!(page.get("jobqueue_workers", &[("state", "idle")]), 4.0);
    assert_eq!(page.get("jobqueue_jobs_held", &[]), 0.0);
    assert_eq!(page.get("jobqueue_queue_gauges_leader", &[]), 1.0);
    assert_eq!(
        page.get("jobqueue_runner", &[("worker_id", "metrics-one")]),
        1.0
    );
    assert!(
        page.0.ends_with("# EOF\n"),
        "OpenMetrics text ends with # EOF"
    );

    // A queue that empties reads 0, not its last depth: jobs scheduled for
    // later show, then, deleted, read 0 while the queue is still exported.
    let later = JobOptions::new()
        .queue("later")
        .run_at(chrono::Utc::now() + chrono::Duration::hours(1));
    put_many(&mut conn, &noops(5), &later);
    let scheduled = [("queue", "later"), ("state", "scheduled")];
    wait_for("the scheduled gauge", Duration::from_secs(10), || {
        runner.scrape().value("jobqueue_queue_jobs", &scheduled) == Some(5.0)
    });
    diesel::sql_query("DELETE FROM jobqueue_jobs WHERE queue = 'later'")
        .execute(&mut conn)
        .expect("delete");
    wait_for(
        "the emptied queue to read 0",
        Duration::from_secs(10),
        || runner.scrape().value("jobqueue_queue_jobs", &scheduled) == Some(0.0),
    );

    // Anything but GET /metrics is a 404 that says where the metrics are.
    let other = ureq::get(&format!("http://127.0.0.1:{}/", runner.port)).call();
    assert!(
        matches!(other, Err(ureq::Error::StatusCode(404))),
        "{other:?}"
    );
    runner.proc.signal("TERM");
}

#[test]
fn the_queue_gauges_show_each_limit_its_use_and_a_back_off() {
    // The side tables: the jobs' handler records its runs, and succeeds
    // (without them each attempt would fail and come back due).
    let (db, mut conn) = TestDb::with_side_tables();
    // Five jobs under two starts a day: two start, three wait on the rate.
    put_many(&mut conn, &noops(5), &JobOptions::new().queue("rated"));
    let daily = RateLimit::new(2, Duration::from_secs(86_400)).expect("a limit");
    set_queue_rate_limit(&mut conn, "rated", Some(daily)).expect("set the rate");
    set_queue_limit(
        &mut conn,
        "capped",
        Some(jobqueue_core::GlobalLimit::new(3).expect("a limit")),
    )
    .expect("set the limit");
    // A handler's "rate limited, retry after 1 h" on capped.
    diesel::sql_query(
        "UPDATE jobqueue_queues SET backoff_until = now() + interval '1 hour' \
         WHERE name = 'capped'",
    )
    .execute(&mut conn)
    .expect("back off");
    // Three jobs of one key behind an ordered key limit, in a paused
    // queue: the first admitted (its key held), two waiting on the key.
    put_many(&mut conn, &noops(1), &JobOptions::new().queue("keyed"));
    pause_queue(&mut conn, "keyed").expect("pause");
    set_queue_key_limit(&mut conn, "keyed", Some(KeyLimit::ordered())).expect("set the key limit");
    let one_key = JobOptions::new()
        .queue("keyed")
        .concurrency_key("customer:42");
    put_many(&mut conn, &noops(3), &one_key);
    set_queue_key_limit(&mut conn, "keyed", Some(KeyLimit::ordered())).expect("admit the first");
    // A workflow in a paused queue: its first step due, the two after it
    // blocked.
    let in_flow = |n| {
        jobqueue_core::NewJob::from_job(&Noop { n }, JobOptions::new().queue("flow")).expect("job")
    };
    let mut flow = jobqueue_core::Workflow::new("gauged").expect("workflow");
    let first = flow.add_job("first", in_flow(0)).expect("step");
    let after: Vec<_> = (1..=2)
        .map(|n| {
            flow.add_job(format!("after-{n}"), in_flow(n))
                .expect("step")
        })
        .collect();
    for step in after {
        flow.after(step, [first]).expect("edge");
    }
    flow.enqueue(&mut conn).expect("enqueue the workflow");
    pause_queue(&mut conn, "flow").expect("pause");
    let runner = MetricsRunner::start(&db, "metrics-limits");
    let rated = [("queue", "rated")];
    let capped = [("queue", "capped")];
    let keyed = [("queue", "keyed")];
    let waiting = [keyed[0], ("state", "waiting")];
    wait_for("two starts in the window", Duration::from_secs(10), || {
        let page = runner.scrape();
        page.value("jobqueue_queue_rate_started", &rated) == Some(2.0)
            && page.value("jobqueue_queue_jobs", &[rated[0], ("state", "due")]) == Some(3.0)
            && page.value("jobqueue_queue_jobs", &[rated[0], ("state", "held")]) == Some(0.0)
            && page.value("jobqueue_queue_keys_held", &keyed).is_some()
    });
    let page = runner.scrape();
    assert_eq!(page.get("jobqueue_queue_rate_limit_starts", &rated), 2.0);
    assert_eq!(
        page.get("jobqueue_queue_rate_limit_period_seconds", &rated),
        86_400.0
    );
    assert_eq!(page.get("jobqueue_queue_global_limit", &capped), 3.0);
    let backoff = page.get("jobqueue_queue_backoff_seconds", &capped);
    assert!((3_500.0..=3_600.0).contains(&backoff), "{backoff}");
    assert_eq!(page.get("jobqueue_queue_backoff_seconds", &rated), 0.0);
    assert_eq!(page.get("jobqueue_queue_key_limit", &keyed), 1.0);
    assert_eq!(page.get("jobqueue_queue_keys_held", &keyed), 1.0);
    assert_eq!(page.get("jobqueue_queue_jobs", &waiting), 2.0);
    assert_eq!(
        page.get(
            "jobqueue_queue_jobs",
            &[("queue", "flow"), ("state", "blocked")]
        ),
        2.0
    );
    assert_eq!(
        page.get(
            "jobqueue_queue_jobs",
            &[("queue", "flow"), ("state", "due")]
        ),
        1.0
    );
    assert_eq!(
        page.get("jobqueue_queue_jobs", &[keyed[0], ("state", "due")]),
        2.0
    );
    assert_eq!(
        page.get("jobqueue_queue_jobs", &[rated[0], ("state", "waiting")]),
        0.0
    );
    // Only the queues that have a limit show it.
    for (name, labels) in [
        ("jobqueue_queue_global_limit", rated),
        ("jobqueue_queue_rate_limit_starts", capped),
        ("jobqueue_queue_rate_limit_period_seconds", capped),
        ("jobqueue_queue_rate_started", capped),
        ("jobqueue_queue_key_limit", rated),
        ("jobqueue_queue_keys_held", capped),
    ] {
        assert_eq!(page.value(name, &labels), None, "{name} {labels:?}");
    }

    // Limits removed and the back-off over: their series go, the back-off
    // reads 0, and the rest of the rated queue runs.
    set_queue_rate_limit(&mut conn, "rated", None).expect("remove the rate");
    set_queue_limit(&mut conn, "capped", None).expect("remove the limit");
    set_queue_key_limit(&mut conn, "keyed", None).expect("remove the key limit");
    resume_queue(&mut conn, "keyed").expect("resume");
    resume_queue(&mut conn, "flow").expect("resume");
    diesel::sql_query("UPDATE jobqueue_queues SET backoff_until = NULL WHERE name = 'capped'")
        .execute(&mut conn)
        .expect("end the back-off");
    wait_no_live_jobs(&mut conn, Duration::from_secs(30));
    wait_for("no stale limit gauges", Duration::from_secs(10), || {
        let page = runner.scrape();
        page.value("jobqueue_queue_backoff_seconds", &capped) == Some(0.0)
            && page.value("jobqueue_queue_global_limit", &capped).is_none()
            && page.value("jobqueue_queue_rate_started", &rated).is_none()
            && page.value("jobqueue_queue_jobs", &[rated[0], ("state", "due")]) == Some(0.0)
            && page.value("jobqueue_queue_jobs", &waiting) == Some(0.0)
    });
    let page = runner.scrape();
    for name in [
        "jobqueue_queue_rate_limit_starts",
        "jobqueue_queue_rate_limit_period_seconds",
    ] {
        assert_eq!(page.value(name, &rated), None, "{name}");
    }
    for name in ["jobqueue_queue_key_limit", "jobqueue_queue_keys_held"] {
        assert_eq!(page.value(name, &keyed), None, "{name}");
    }
    runner.proc.signal("TERM");
}

#[test]
fn one_runner_computes_the_queue_gauges_and_another_takes_over_when_it_dies() {
    let (db, mut conn) = TestDb::connected();
    let first = MetricsRunner::start(&db, "gauges-first");
    let second = MetricsRunner::start(&db, "gauges-second");
    let later = JobOptions::new()
        .queue("held-back")
        .run_at(chrono::Utc::now() + chrono::Duration::hours(1));
    put_many(&mut conn, &noops(7), &later);
    let scheduled = [("queue", "held-back"), ("state", "scheduled")];
    let leads = |r: &MetricsRunner| r.scrape().value("jobqueue_queue_gauges_leader", &[]);
    wait_for("exactly one leader", Duration::from_secs(10), || {
        let (a, b) = (leads(&first), leads(&second));
        matches!((a, b), (Some(1.0), Some(0.0)) | (Some(0.0), Some(1.0)))
    });
    let (leader, other) = if leads(&first) == Some(1.0) {
        (first, second)
    } else {
        (second, first)
    };
    wait_for("the leader's gauges", Duration::from_secs(10), || {
        leader.scrape().value("jobqueue_queue_jobs", &scheduled) == Some(7.0)
    });
    assert_eq!(
        other.scrape().value("jobqueue_queue_jobs", &scheduled),
        None,
        "only the leader exports the table-wide gauges"
    );
    // Its session ends with it, and the advisory lock with the session.
    leader.proc.signal("KILL");
    wait_for(
        "the other runner to take over",
        Duration::from_secs(15),
        || {
            let page = other.scrape();
            page.value("jobqueue_queue_gauges_leader", &[]) == Some(1.0)
                && page.value("jobqueue_queue_jobs", &scheduled) == Some(7.0)
        },
    );
    other.proc.signal("TERM");
}

#[test]
fn a_metrics_address_that_cannot_be_bound_refuses_the_start() {
    let db = TestDb::new();
    let taken = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let addr = taken.local_addr().expect("address").to_string();
    let args = [
        "work",
        "--worker-id",
        "metrics-refused",
        "--metrics-addr",
        addr.as_str(),
    ];
    let (code, _, err) = run_cli(WORKER, &db.url, &args);
    assert_eq!(code, Some(1), "{err}");
    assert!(
        err.contains(&format!("cannot serve metrics on {addr}")),
        "{err}"
    );
    let mut conn = db.conn();
    assert_eq!(
        count_where(&mut conn, "true"),
        0,
        "nothing enqueued or claimed"
    );
    let registered: i64 =
        jobqueue_tests::scalar(&mut conn, "SELECT count(*) AS n FROM jobqueue_runners");
    assert_eq!(registered, 0, "the refused runner never registered");

    // Not an address at all: a wrong command line, said before connecting.
    let (code, _, err) = run_cli(WORKER, &db.url, &["work", "--metrics-addr", "localhost"]);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("--metrics-addr"), "{err}");
}

#[test]
fn an_embedding_application_reads_the_metrics_text_when_kept() {
    let db = TestDb::new();
    let registry = Registry::new().register::<Noop>();
    let off = Runner::new(RunnerConfig::new(&db.url), registry.clone())
        .start()
        .expect("start");
    assert_eq!(off.metrics_text(), None, "off by default");
    off.shutdown();
    let mut config = RunnerConfig::new(&db.url);
    config.metrics = MetricsMode::Keep;
    let kept = Runner::new(config, registry).start().expect("start");
    let text = kept.metrics_text().expect("kept");
    assert!(
        text.contains("# TYPE jobqueue_claims_empty counter"),
        "{text}"
    );
    assert!(
        text.contains("jobqueue_workers{state=\"idle\"} 8"),
        "{text}"
    );
    kept.shutdown();
}
