//! Per-key concurrency and order, fleet-wide: four runner processes work
//! 4,000 jobs of 1,000 keys (ten of them busy: 100 jobs each) in a queue
//! limited to two jobs per key, one of
//! them SIGKILLed and replaced midway with jobs in hand; a sampler reads
//! the jobs held per key throughout. An ordered queue starts each key's
//! jobs in enqueue order, one at a time, through a retry and a snooze of a
//! key's head. Also: limits raised, removed and swept, what the queue list
//! shows, and bad input refused with the reason.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use diesel::prelude::*;
use jobqueue_core::engine::{QueueKey, QueueSession, admit_keys, admit_keys_in_line, admit_new};
use jobqueue_core::{
    Counting, Error, Job, JobOptions, JobStatus, KeyLimit, NewJob, enqueue_many, list_queues,
    set_queue_key_limit,
};
use jobqueue_runner::RunnerConfig;
use jobqueue_tests::fault::{Proc, runner_flags};
use jobqueue_tests::jobs::{Noop, Sleep, Stumble, registry};
use jobqueue_tests::{
    TestDb, autovacuum_off, count_where, entries_read, exec, scalar, start_runner, wait_count,
    wait_for,
};

const WORKER: &str = env!("CARGO_BIN_EXE_jobqueue-test-worker");

/// `n` jobs of `job` in `queue`, the i-th keyed by `key(i)`.
fn keyed<J: Job>(
    n: usize,
    queue: &str,
    job: impl Fn(usize) -> J,
    key: impl Fn(usize) -> String,
) -> Vec<NewJob> {
    (0..n)
        .map(|i| {
            NewJob::from_job(
                &job(i),
                JobOptions::new().queue(queue).concurrency_key(key(i)),
            )
        })
        .collect::<Result<_, _>>()
        .expect("build")
}

/// Makes `queue` known (a job names it) and sets its key limit.
fn limit_queue(conn: &mut PgConnection, queue: &str, limit: KeyLimit) {
    Noop { n: 0 }
        .options()
        .queue(queue)
        .enqueue(conn)
        .expect("enqueue");
    set_queue_key_limit(conn, queue, Some(limit)).expect("set the key limit");
}

/// The most jobs of one key of `queue` in `statuses` (an SQL list), in one
/// snapshot.
fn most_per_key(conn: &mut PgConnection, queue: &str, statuses: &str) -> i64 {
    scalar(
        conn,
        &format!(
            "SELECT coalesce(max(n), 0) AS n FROM (
                 SELECT count(*) AS n FROM jobqueue_jobs
                 WHERE queue = '{queue}' AND concurrency_key IS NOT NULL
                   AND status IN ({statuses})
                 GROUP BY concurrency_key) AS per_key"
        ),
    )
}

/// Reads, until stopped, the most jobs of one key held (claimed or
/// running) and admitted (every live status but `waiting`) at once.
struct Sampler {
    stop: Arc<AtomicBool>,
    thread: std::thread::JoinHandle<(i64, i64, usize)>,
}

impl Sampler {
    fn start(url: &str, queue: &'static str) -> Sampler {
        let stop = Arc::new(AtomicBool::new(false));
        let (flag, url) = (Arc::clone(&stop), url.to_owned());
        let thread = std::thread::spawn(move || {
            let mut conn = PgConnection::establish(&url).expect("connect the sampler");
            let (mut held, mut admitted, mut samples) = (0, 0, 0);
            while !flag.load(Ordering::Relaxed) {
                held = held.max(most_per_key(&mut conn, queue, "'claimed', 'running'"));
                admitted = admitted.max(most_per_key(
                    &mut conn,
                    queue,
                    "'scheduled', 'pending', 'unhandled', 'claimed', 'running'",
                ));
                samples += 1;
            }
            (held, admitted, samples)
        });
        Sampler { stop, thread }
    }

    /// The most held, the most admitted, the number of samples.
    fn finish(self) -> (i64, i64, usize) {
        self.stop.store(true, Ordering::Relaxed);
        self.thread.join().expect("the sampler")
    }
}

#[test]
fn four_processes_and_a_kill_never_hold_more_than_the_limit_of_a_key() {
    const JOBS: usize = 4000;
    const KEYS: usize = 1000;
    const LIMIT: i64 = 2;
    let (db, mut conn) = TestDb::with_side_tables();
    limit_queue(
        &mut conn,
        "keyed",
        KeyLimit::per_key(LIMIT as u32).expect("a limit"),
    );
    // A quarter of the jobs belong to ten busy keys (100 jobs each), the
    // rest to 990 keys of 3 or 4 jobs each.
    let key = |i: usize| match i % 4 {
        0 => format!("busy:{}", i % 10),
        _ => format!("customer:{}", i % (KEYS - 10)),
    };
    let jobs = keyed(JOBS, "keyed", |_| Sleep { ms: 40 }, key);
    // Half of them up front, in one batch: the enqueue admits each key's
    // first two and leaves the rest waiting.
    let (first_half, second_half) = jobs.split_at(JOBS / 2);
    enqueue_many(&mut conn, first_half).expect("enqueue");
    assert_eq!(
        most_per_key(&mut conn, "keyed", "'pending'"),
        LIMIT,
        "the enqueue admitted up to the limit of each key"
    );
    let per_key_left = scalar(
        &mut conn,
        &format!(
            "SELECT count(*) AS n FROM (
                 SELECT concurrency_key FROM jobqueue_jobs
                 WHERE queue = 'keyed' AND concurrency_key IS NOT NULL
                 GROUP BY concurrency_key
                 HAVING count(*) FILTER (WHERE status = 'pending')
                        <> least(count(*), {LIMIT})) AS wrong"
        ),
    );
    assert_eq!(
        per_key_left, 0,
        "each key admitted the least of its jobs and the limit"
    );

    let sampler = Sampler::start(&db.url, "keyed");
    let flags = runner_flags(&[("concurrency", "8"), ("lease-secs", "2")]);
    let mut runners: Vec<Proc> = (0..4)
        .map(|i| Proc::runner(WORKER, &db.url, &format!("keyed-{i}"), &flags))
        .collect();
    // The other half from two producers while the runners work: batches of
    // 1 to 8 jobs, each enqueue racing the others and the runners'
    // admissions for the keys' room.
    let producers: Vec<std::thread::JoinHandle<()>> = second_half
        .chunks(second_half.len() / 2 + 1)
        .map(|share| {
            let (url, share) = (db.url.clone(), share.to_vec());
            std::thread::spawn(move || {
                let mut conn = PgConnection::establish(&url).expect("connect a producer");
                let mut rest = share.as_slice();
                let mut size = 1;
                while !rest.is_empty() {
                    let (batch, after) = rest.split_at(size.min(rest.len()));
                    enqueue_many(&mut conn, batch).expect("enqueue during the run");
                    rest = after;
                    size = size % 8 + 1;
                }
            })
        })
        .collect();
    for producer in producers {
        producer.join().expect("a producer");
    }
    wait_for("a third of the jobs done", Duration::from_secs(60), || {
        count_where(
            &mut conn,
            "status = 'completed' AND concurrency_key IS NOT NULL",
        ) >= JOBS as i64 / 3
    });
    let mut victim = runners.swap_remove(1);
    victim.signal("KILL");
    victim.wait_exit(Duration::from_secs(10));
    runners.push(Proc::runner(WORKER, &db.url, "keyed-4", &flags));
    wait_count(
        &mut conn,
        "status = 'completed' AND concurrency_key IS NOT NULL",
        JOBS as i64,
    );
    let (held, admitted, samples) = sampler.finish();
    for runner in &mut runners {
        runner.terminate(Duration::from_secs(30));
    }
    let restarted = scalar(
        &mut conn,
        "SELECT count(DISTINCT job_id) AS n FROM test_effects
         WHERE kind = 'start' AND attempt > 1",
    );
    eprintln!(
        "{JOBS} jobs of {KEYS} keys, limit {LIMIT} per key, 4 runners and a kill: most held \
         per key {held}, most admitted per key {admitted}, over {samples} samples; \
         {restarted} jobs started again after the kill"
    );
    assert!(samples >= 20, "only {samples} samples");
    assert!(held <= LIMIT, "{held} jobs of one key held at once");
    assert!(
        admitted <= LIMIT,
        "{admitted} jobs of one key admitted at once"
    );
    assert_eq!(held, LIMIT, "keys ran their limit of jobs at once");
    assert!(restarted > 0, "the killed runner held jobs, started again");
}

/// Per key of `queue`, the jobs by enqueue order (id), each with the time
/// of its first start and of its `done`, as `(key, id, first start, done)`
/// rows: for the order checks.
fn starts_and_ends(conn: &mut PgConnection) -> i64 {
    // A job starts after the one before it in its key's line has finished,
    // and its line is enqueue order: count the jobs that break either.
    scalar(
        conn,
        "WITH runs AS (
             SELECT k.key, k.seq, k.id,
                    (SELECT min(at) FROM test_effects AS e
                     WHERE e.job_id = k.id AND e.kind = 'start') AS first_start,
                    (SELECT max(at) FROM test_effects AS e
                     WHERE e.job_id = k.id AND e.kind = 'done') AS done
             FROM line AS k
         ),
         ordered AS (
             SELECT r.*, lag(r.done) OVER w AS before_done,
                    lag(r.first_start) OVER w AS before_start
             FROM runs AS r
             WINDOW w AS (PARTITION BY r.key ORDER BY r.seq)
         )
         SELECT count(*) AS n FROM ordered
         WHERE first_start IS NULL OR done IS NULL
            OR (before_done IS NOT NULL AND first_start < before_done)
            OR (before_start IS NOT NULL AND first_start < before_start)",
    )
}

#[test]
fn an_ordered_queue_starts_each_keys_jobs_in_order_one_at_a_time_through_a_retry_and_a_snooze() {
    const KEYS: usize = 20;
    const PER_KEY: usize = 8;
    let (db, mut conn) = TestDb::with_side_tables();
    limit_queue(&mut conn, "ledger", KeyLimit::ordered());
    // Key 0's head fails its first attempt (retried 20 ms later), key 1's
    // head snoozes: the jobs behind each wait for it.
    let first = |i: usize| match i {
        0 => "fail",
        1 => "snooze",
        _ => "",
    };
    let jobs = keyed(
        KEYS * PER_KEY,
        "ledger",
        |i| Stumble {
            ms: 5,
            first: first(i).to_owned(),
        },
        |i| format!("account:{}", i % KEYS),
    );
    diesel::sql_query("CREATE TABLE line (key text, seq int, id uuid)")
        .execute(&mut conn)
        .expect("create line");
    for (i, job) in jobs.iter().enumerate() {
        diesel::sql_query("INSERT INTO line VALUES ($1, $2, $3)")
            .bind::<diesel::sql_types::Text, _>(format!("account:{}", i % KEYS))
            .bind::<diesel::sql_types::Integer, _>(i as i32)
            .bind::<diesel::sql_types::Uuid, _>(job.id())
            .execute(&mut conn)
            .expect("note the line");
    }
    enqueue_many(&mut conn, &jobs).expect("enqueue");

    let config = || {
        RunnerConfig::new(&db.url)
            .concurrency(8)
            .queues(["ledger"])
            .poll_interval(Duration::from_millis(200))
            .keep_completed(Duration::from_secs(3600))
    };
    let runners = [
        start_runner(config(), registry()),
        start_runner(config(), registry()),
    ];
    wait_count(
        &mut conn,
        "status = 'completed' AND queue = 'ledger' AND concurrency_key IS NOT NULL",
        (KEYS * PER_KEY) as i64,
    );
    for runner in runners {
        runner.shutdown();
    }
    let out_of_order = starts_and_ends(&mut conn);
    let stumbles = scalar(
        &mut conn,
        "SELECT count(*) AS n FROM test_effects WHERE kind IN ('fail', 'snooze')",
    );
    let overlapping_keys = scalar(
        &mut conn,
        "SELECT count(*) AS n FROM (
             SELECT DISTINCT a.key FROM line AS a JOIN line AS b
                 ON a.key <> b.key
             JOIN test_effects AS ea ON ea.job_id = a.id AND ea.kind = 'start'
             JOIN test_effects AS eb ON eb.job_id = b.id AND eb.kind = 'start'
             WHERE abs(EXTRACT(EPOCH FROM ea.at - eb.at)) < 0.004
             LIMIT 5) AS concurrent_keys",
    );
    eprintln!(
        "{} jobs of {KEYS} ordered keys: {out_of_order} out of order or overlapping their \
         key's previous job; {stumbles} first attempts stumbled (a retry, a snooze)",
        KEYS * PER_KEY
    );
    assert_eq!(stumbles, 2, "the two heads stumbled once each");
    assert_eq!(
        out_of_order, 0,
        "every job started after the one before it in its key finished"
    );
    assert!(overlapping_keys > 0, "different keys ran at the same time");
}

/// The status of job `id`.
fn status_of(conn: &mut PgConnection, id: jobqueue_core::JobId) -> JobStatus {
    jobqueue_tests::read_job(conn, id).status
}

#[test]
fn an_enqueue_admits_what_its_key_has_room_for_and_never_waits_for_another() {
    let (db, mut conn) = TestDb::connected();
    limit_queue(&mut conn, "calls", KeyLimit::per_key(2).expect("a limit"));
    let key = |name: &'static str| move |_: usize| name.to_owned();

    // One batch: the first two of key a admitted, the rest waiting behind
    // them; key b's one job admitted.
    let a = keyed(5, "calls", |i| Noop { n: i as u64 }, key("a"));
    let b = keyed(1, "calls", |_| Noop { n: 9 }, key("b"));
    enqueue_many(&mut conn, &[a.clone(), b.clone()].concat()).expect("enqueue");
    let statuses: Vec<JobStatus> = a.iter().map(|job| status_of(&mut conn, job.id())).collect();
    use JobStatus::{Pending, Waiting};
    assert_eq!(statuses, [Pending, Pending, Waiting, Waiting, Waiting]);
    assert_eq!(status_of(&mut conn, b[0].id()), Pending);
    // Behind waiting jobs of its key, a new job waits too, room or not.
    exec(
        &mut conn,
        &format!("DELETE FROM jobqueue_jobs WHERE id = '{}'", a[0].id()),
    );
    let later = keyed(1, "calls", |_| Noop { n: 10 }, key("a"));
    jobqueue_core::enqueue(&mut conn, &later[0]).expect("enqueue");
    assert_eq!(status_of(&mut conn, later[0].id()), Waiting);

    // Two open transactions enqueue a job of key c each: the first holds
    // c's lock and admits its job; the second does not wait for it, and
    // its job waits for an admission.
    let mut other = PgConnection::establish(&db.url).expect("a second connection");
    let c1 = keyed(1, "calls", |_| Noop { n: 11 }, key("c"));
    let c2 = keyed(1, "calls", |_| Noop { n: 12 }, key("c"));
    conn.transaction(|conn| {
        jobqueue_core::enqueue(conn, &c1[0])?;
        other.transaction(|other| jobqueue_core::enqueue(other, &c2[0]))?;
        Ok::<_, Error>(())
    })
    .expect("two enqueues at once");
    assert_eq!(status_of(&mut conn, c1[0].id()), Pending);
    assert_eq!(status_of(&mut conn, c2[0].id()), Waiting);
    // A REPEATABLE READ transaction's snapshot may predate an admission:
    // its enqueue admits nothing.
    let d = keyed(1, "calls", |_| Noop { n: 13 }, key("d"));
    conn.build_transaction()
        .repeatable_read()
        .run(|conn| jobqueue_core::enqueue(conn, &d[0]))
        .expect("enqueue in REPEATABLE READ");
    assert_eq!(status_of(&mut conn, d[0].id()), Waiting);

    // An admission leaves a key whose enqueue is open to its next pass:
    // key a has room for one (one holder left) and three jobs waiting.
    let a_key = [QueueKey {
        queue: "calls".into(),
        key: "a".into(),
    }];
    let e = keyed(1, "calls", |_| Noop { n: 14 }, key("a"));
    conn.transaction(|conn| {
        jobqueue_core::enqueue(conn, &e[0])?;
        assert_eq!(
            admit_keys(&mut other, &a_key)?,
            0,
            "key a's enqueue is open"
        );
        Ok::<_, Error>(())
    })
    .expect("an admission beside an open enqueue");
    assert_eq!(status_of(&mut conn, e[0].id()), Waiting);
    // The next pass of new jobs admits the head of a's line, and c's and
    // d's waiting jobs.
    let page = admit_new(&mut other, &[], None, 100).expect("admit new jobs");
    assert_eq!(page.admitted, 3);
    assert_eq!(status_of(&mut conn, a[2].id()), Pending);
    assert_eq!(status_of(&mut conn, c2[0].id()), Pending);
    assert_eq!(status_of(&mut conn, d[0].id()), Pending);
    assert_eq!(
        most_per_key(&mut conn, "calls", "'pending'"),
        2,
        "no key over its limit"
    );

    // However many keys one transaction enqueues, it holds at most 256
    // key locks per queue (entries of the server's shared lock table).
    let many = keyed(
        3000,
        "calls",
        |i| Noop { n: i as u64 },
        |i| format!("many:{i}"),
    );
    // The look-up of that many keys' room runs without JIT compilation;
    // the caller's transaction keeps its own setting.
    let (locks, jit) = conn
        .transaction(|conn| {
            exec(conn, "SET LOCAL jit = on");
            enqueue_many(conn, &many)?;
            let locks = scalar(
                conn,
                "SELECT count(*) AS n FROM pg_locks
                 WHERE locktype = 'advisory' AND pid = pg_backend_pid()",
            );
            let jit = scalar(
                conn,
                "SELECT (current_setting('jit') = 'on')::int::int8 AS n",
            );
            Ok::<_, Error>((locks, jit))
        })
        .expect("enqueue many keys");
    assert!(locks <= 256, "{locks} advisory locks held for 3,000 keys");
    assert_eq!(jit, 1, "the caller's JIT setting is back after the enqueue");
    assert_eq!(
        count_where(
            &mut conn,
            "status = 'pending' AND concurrency_key LIKE 'many:%'"
        ),
        3000,
        "each of them admitted by the enqueue"
    );
}

#[test]
fn an_admission_of_keys_in_line_admits_what_the_looking_one_does() {
    let (_db, mut conn) = TestDb::connected();
    limit_queue(&mut conn, "line", KeyLimit::per_key(1).expect("a limit"));
    // Key a: its first job admitted by the enqueue, two waiting behind it.
    let a = keyed(3, "line", |i| Noop { n: i as u64 }, |_| "a".to_owned());
    enqueue_many(&mut conn, &a).expect("enqueue");
    let keys: Vec<QueueKey> = ["a", "b"]
        .iter()
        .map(|key| QueueKey {
            queue: "line".into(),
            key: (*key).into(),
        })
        .collect();
    // The head still holds a: nothing to admit, key b has no line at all.
    assert_eq!(admit_keys_in_line(&mut conn, &keys).expect("admit"), 0);
    assert_eq!(admit_keys(&mut conn, &keys).expect("admit"), 0);
    for next in 1..3 {
        exec(
            &mut conn,
            &format!(
                "DELETE FROM jobqueue_jobs WHERE id = '{}'",
                a[next - 1].id()
            ),
        );
        assert_eq!(admit_keys_in_line(&mut conn, &keys).expect("admit"), 1);
        assert_eq!(status_of(&mut conn, a[next].id()), JobStatus::Pending);
        assert_eq!(admit_keys_in_line(&mut conn, &keys).expect("admit"), 0);
    }
    assert_eq!(admit_keys_in_line(&mut conn, &[]).expect("admit"), 0);
}

#[test]
fn a_runner_that_found_no_job_waiting_admits_again_once_jobs_wait() {
    let (db, mut conn) = TestDb::with_side_tables();
    limit_queue(&mut conn, "quiet", KeyLimit::per_key(1).expect("a limit"));
    // No sweep within the test: only the admissions after completions and
    // of new jobs can admit.
    let runner = start_runner(
        RunnerConfig::new(&db.url)
            .queues(["quiet"])
            .poll_interval(Duration::from_millis(100))
            .rescue_interval(Duration::from_secs(3600))
            .keep_completed(Duration::from_secs(3600)),
        registry(),
    );
    wait_for("the runner's listener", Duration::from_secs(30), || {
        scalar(
            &mut conn,
            "SELECT count(*) AS n FROM pg_stat_activity WHERE query LIKE 'LISTEN %'",
        ) >= 1
    });
    // Jobs of distinct keys never wait: after their completions the runner
    // finds no job waiting, and leaves its admissions out from then on.
    let solo = keyed(
        50,
        "quiet",
        |i| Noop { n: i as u64 },
        |i| format!("solo:{i}"),
    );
    enqueue_many(&mut conn, &solo).expect("enqueue");
    wait_count(
        &mut conn,
        "status = 'completed' AND concurrency_key LIKE 'solo:%'",
        50,
    );
    // A line of one key: its enqueue admits the first, and the others wait
    // behind it, looked at (no pass of new jobs admits them). Each is
    // admitted after the one before it completes: the runner heard that
    // jobs wait again.
    let line = keyed(5, "quiet", |i| Noop { n: i as u64 }, |_| "line".to_owned());
    enqueue_many(&mut conn, &line).expect("enqueue");
    assert_eq!(
        count_where(&mut conn, "status = 'waiting' AND key_checked"),
        4,
        "the jobs behind the first wait for it, looked at"
    );
    wait_count(
        &mut conn,
        "status = 'completed' AND concurrency_key = 'line'",
        5,
    );
    runner.shutdown();
}

#[test]
fn a_raised_or_removed_limit_admits_at_once_and_a_cancelled_holder_frees_its_key() {
    let (_db, mut conn) = TestDb::with_side_tables();
    limit_queue(&mut conn, "tenants", KeyLimit::per_key(1).expect("a limit"));
    let jobs = keyed(6, "tenants", |_| Sleep { ms: 1 }, |_| "tenant:1".to_owned());
    enqueue_many(&mut conn, &jobs).expect("enqueue");
    // No runner: the enqueue admitted what the key had room for itself.
    assert_eq!(count_where(&mut conn, "status = 'waiting'"), 5);
    // A raised limit admits at once, oldest first.
    set_queue_key_limit(&mut conn, "tenants", Some(KeyLimit::per_key(2).expect("2")))
        .expect("raise");
    assert_eq!(
        count_where(
            &mut conn,
            "status = 'pending' AND concurrency_key IS NOT NULL"
        ),
        2
    );
    let admitted: Vec<bool> = jobs
        .iter()
        .map(|job| jobqueue_tests::read_job(&mut conn, job.id()).status == JobStatus::Pending)
        .collect();
    assert_eq!(admitted, [true, true, false, false, false, false]);
    let queue = list_queues(&mut conn, Counting::Live)
        .expect("list")
        .into_iter()
        .find(|q| q.queue == "tenants")
        .expect("the queue");
    assert_eq!(queue.key_limit, KeyLimit::per_key(2).ok());
    assert_eq!(queue.keys_held, 1);
    assert_eq!(queue.count(JobStatus::Waiting), 4);

    // A holder cancelled by hand frees its place at once: the cancel admits
    // the next in its own transaction (it waited for a runner's sweep).
    jobqueue_core::cancel(&mut conn, jobs[0].id()).expect("cancel");
    assert_eq!(count_where(&mut conn, "status = 'waiting'"), 3);
    assert_eq!(
        count_where(
            &mut conn,
            "status = 'pending' AND concurrency_key IS NOT NULL"
        ),
        2
    );

    // The limit removed: every waiting job is admitted.
    set_queue_key_limit(&mut conn, "tenants", None).expect("remove");
    assert_eq!(count_where(&mut conn, "status = 'waiting'"), 0);
    assert_eq!(
        count_where(
            &mut conn,
            "status = 'pending' AND concurrency_key IS NOT NULL"
        ),
        5
    );
}

#[test]
fn bad_keys_and_limits_are_refused_with_the_reason_and_a_new_queue_takes_a_limit() {
    let (_db, mut conn) = TestDb::connected();
    let long = "k".repeat(256);
    let error = NewJob::from_job(&Noop { n: 0 }, JobOptions::new().concurrency_key(long))
        .expect_err("too long");
    assert!(
        matches!(&error, Error::InvalidOption { .. }) && error.to_string().contains("1 to 255"),
        "{error}"
    );
    let empty =
        NewJob::from_job(&Noop { n: 0 }, JobOptions::new().concurrency_key("")).expect_err("empty");
    assert!(empty.to_string().contains("it has 0"), "{empty}");
    let zero = KeyLimit::per_key(0).expect_err("zero");
    assert!(zero.to_string().contains("give 1 to 10000"), "{zero}");
    let negative = "-3".parse::<KeyLimit>().expect_err("negative");
    assert!(
        negative.to_string().contains("-3 jobs per key"),
        "{negative}"
    );
    // A queue nothing names yet takes a limit before its first jobs.
    let unknown = set_queue_key_limit(&mut conn, "no-such-queue", Some(KeyLimit::ordered()))
        .expect("a limit before the first jobs");
    assert!(!unknown.known);
    assert_eq!(
        scalar(
            &mut conn,
            "SELECT count(*) AS n FROM jobqueue_queues WHERE name = 'no-such-queue' AND key_ordered"
        ),
        1,
        "the limit waits for the queue's first jobs"
    );
}

/// Runs `admission` in a transaction of `session`; returns the index
/// entries and rows it read (`entries_read`) and what it returned.
fn read_during<T>(
    session: &mut QueueSession,
    admission: impl FnOnce(&mut PgConnection) -> Result<T, Error>,
) -> (i64, T) {
    session
        .conn()
        .transaction(|conn| {
            let before = entries_read(conn);
            let value = admission(conn)?;
            Ok::<_, Error>((entries_read(conn) - before, value))
        })
        .expect("the admission")
}

#[test]
fn an_enqueue_counts_its_keys_holders_through_their_index_however_large_the_table_grew() {
    const HOLDERS: i64 = 20_000;
    const JOBS: usize = 100;
    let (_db, mut conn) = TestDb::connected();
    limit_queue(&mut conn, "grow", KeyLimit::per_key(2).expect("a limit"));
    autovacuum_off(&mut conn);
    // Every statement this connection keeps prepared runs the plan made at
    // its first run (a server may settle on such a plan after five runs).
    exec(&mut conn, "SET plan_cache_mode = force_generic_plan");
    // Statistics of a table of one page, one job.
    exec(
        &mut conn,
        "INSERT INTO jobqueue_jobs (id, job_type, queue, status)
         VALUES (gen_random_uuid(), 'test.noop', 'grow', 'pending')",
    );
    exec(&mut conn, "ANALYZE jobqueue_jobs");
    // The connection's first enqueues of keyed jobs meet that table: a
    // plan kept from then would read the whole table for each key.
    for round in 0..10 {
        let jobs = keyed(
            2,
            "grow",
            |i| Noop { n: i as u64 },
            |i| format!("early:{round}:{i}"),
        );
        enqueue_many(&mut conn, &jobs).expect("enqueue");
        let one = keyed(1, "grow", |_| Noop { n: 0 }, |_| format!("one:{round}"));
        jobqueue_core::enqueue(&mut conn, &one[0]).expect("enqueue one");
    }
    // Then the table grows: holders of other keys.
    exec(
        &mut conn,
        &format!(
            "INSERT INTO jobqueue_jobs (id, job_type, queue, status, concurrency_key)
             SELECT gen_random_uuid(), 'test.noop', 'grow', 'pending', 'bulk:' || g
             FROM generate_series(1, {HOLDERS}) AS g"
        ),
    );
    let jobs = keyed(
        JOBS,
        "grow",
        |i| Noop { n: i as u64 },
        |i| format!("late:{i}"),
    );
    let one = keyed(1, "grow", |_| Noop { n: 1 }, |_| "late:one".to_owned());
    let (batch, single) = conn
        .transaction(|conn| {
            let before = entries_read(conn);
            enqueue_many(conn, &jobs)?;
            let after_batch = entries_read(conn);
            jobqueue_core::enqueue(conn, &one[0])?;
            Ok::<_, Error>((after_batch - before, entries_read(conn) - after_batch))
        })
        .expect("enqueue into the grown table");
    eprintln!(
        "an enqueue of {JOBS} keyed jobs read {batch} index entries and rows, one of one job \
         {single}, beside {HOLDERS} holders"
    );
    assert_eq!(
        count_where(
            &mut conn,
            "status = 'pending' AND (concurrency_key LIKE 'late:%' \
             OR concurrency_key LIKE 'early:%' OR concurrency_key LIKE 'one:%')"
        ),
        JOBS as i64 + 1 + 30,
        "each admitted by its enqueue"
    );
    assert!(
        batch <= 10 * JOBS as i64,
        "{batch} entries read for {JOBS} jobs: the table read for each"
    );
    assert!(single <= 10, "{single} entries read for one job");
}

#[test]
fn admissions_read_what_they_admit_even_with_statistics_that_call_the_table_empty() {
    const KEYS: usize = 2000;
    const JOBS: usize = 20_000;
    const BATCH: i64 = 1000;
    let (db, mut conn) = TestDb::connected();
    limit_queue(&mut conn, "lines", KeyLimit::per_key(1).expect("a limit"));
    // Statistics taken while the table held one job, and kept.
    autovacuum_off(&mut conn);
    exec(&mut conn, "ANALYZE jobqueue_jobs");
    // Ten jobs per key, a batch per round of keys: each key's first job is
    // the head of its line, the others wait behind it.
    // Enqueued in REPEATABLE READ transactions, which admit nothing at
    // insert: every job waits for an admission pass.
    for round in 0..JOBS / KEYS {
        let jobs = keyed(
            KEYS,
            "lines",
            |_| Noop { n: round as u64 },
            |i| format!("line:{i}"),
        );
        conn.build_transaction()
            .repeatable_read()
            .run(|conn| enqueue_many(conn, &jobs))
            .expect("enqueue");
    }
    assert_eq!(count_where(&mut conn, "status = 'waiting'"), JOBS as i64);
    let mut session = QueueSession::establish(&db.url).expect("a queue session");
    let (read, page) = read_during(&mut session, |conn| admit_new(conn, &[], None, BATCH));
    let (admitted, looked) = (page.admitted, page.looked);
    assert_eq!(looked as i64, BATCH, "a full batch of heads looked at");
    eprintln!(
        "admitting {admitted} of {JOBS} waiting jobs (the heads of {BATCH} keys) read {read} \
         index entries and rows"
    );
    assert_eq!(admitted, BATCH, "each head admitted");
    assert!(
        read <= 6 * BATCH,
        "{read} entries read to admit {BATCH} jobs: a walk of the waiting jobs"
    );
    // The heads finish; their keys' next jobs are admitted.
    let keys: Vec<QueueKey> = (0..BATCH)
        .map(|i| QueueKey {
            queue: "lines".into(),
            key: format!("line:{i}"),
        })
        .collect();
    exec(
        &mut conn,
        "DELETE FROM jobqueue_jobs WHERE status = 'pending' AND queue = 'lines'",
    );
    let (read, admitted) = read_during(&mut session, |conn| admit_keys(conn, &keys));
    eprintln!("admitting the next job of {BATCH} keys read {read} index entries and rows");
    assert_eq!(admitted, BATCH, "each key's next job admitted");
    assert!(
        read <= 8 * BATCH,
        "{read} entries read to admit {BATCH} jobs: a walk of the waiting jobs"
    );
}
