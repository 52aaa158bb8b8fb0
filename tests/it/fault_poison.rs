//! Fault injection, poison input: payloads that do not fit their type, JSON
//! that is not JSON, oversized payloads, a panicking handler, an unknown job
//! type, and names full of quotes, semicolons, backslashes, newlines and
//! non-ASCII text. Each gets a clear error (on the job row, from the API, or
//! on stderr), nothing is executed as SQL, and the runner keeps working.

use std::process::{Command, Output};
use std::time::Duration;

use diesel::connection::SimpleConnection;
use diesel::prelude::*;
use diesel::sql_types::{Nullable, Text};
use jobqueue_core::{Error, Job, JobOptions, NewJob, enqueue};
use jobqueue_tests::fault::{Proc, Summary, runner_flags};
use jobqueue_tests::jobs::{Blob, Noop, Panic};
use jobqueue_tests::{
    TestDb, assert_success, count_where, effects_where, enqueue_all, put, scalar, wait_for,
};

const WORKER: &str = env!("CARGO_BIN_EXE_jobqueue-test-worker");

/// Names no queue or job type may have (none has a comma: `--queues`
/// splits on commas).
const HOSTILE: &[&str] = &[
    "it's",
    "semi;colon",
    "back\\slash",
    "new\nline",
    "tab\there",
    "ünïcödé",
    "日本語",
    "\"quoted\"",
    "x'); DROP TABLE canary; --",
    "$$; DROP TABLE canary; $$",
    "percent%s",
    "LISTEN\"; NOTIFY x",
];

fn setup() -> (TestDb, PgConnection) {
    TestDb::with_side_tables()
}

fn cli(db: &TestDb, args: &[&str]) -> Output {
    Command::new(WORKER)
        .arg("--database-url")
        .arg(&db.url)
        .args(args)
        .output()
        .expect("run the CLI")
}

/// Runs the CLI expecting it to refuse its command line (exit code 2) with
/// one clear line on stderr containing `expect`.
fn cli_refuses(db: &TestDb, args: &[&str], expect: &str) {
    let out = cli(db, args);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
    assert!(
        stderr.starts_with("jobqueue-test-worker: error: ") && stderr.contains(expect),
        "{args:?}: {stderr}"
    );
}

fn enqueue_noops(conn: &mut PgConnection, from: u64, n: u64) {
    enqueue_all(conn, (from..from + n).map(|n| Noop { n }));
}

#[test]
fn poison_payloads_panics_and_unknown_types_fail_clearly_and_the_runner_goes_on() {
    let (db, mut conn) = setup();
    let mut runner = Proc::runner(
        WORKER,
        &db.url,
        "poison",
        &runner_flags(&[("poll-interval-ms", "200")]),
    );
    let mut faults = 0;

    // Valid JSON that is not a `test.noop` payload: wrong types and shapes,
    // inserted the way a foreign producer would (bound parameters).
    let misfits = [
        r#"{"n": "not a number"}"#,
        r#"{"n": -1}"#,
        r#"{"n": 1.5}"#,
        r#"{"n": 18446744073709551616}"#,
        r#"{}"#,
        r#"[1, 2, 3]"#,
        r#""just text""#,
        "null",
    ];
    for payload in misfits {
        diesel::sql_query(
            "INSERT INTO jobqueue_jobs (id, job_type, payload, max_attempts)
             VALUES (gen_random_uuid(), 'test.noop', CAST($1 AS jsonb), 5)",
        )
        .bind::<Text, _>(payload)
        .execute(&mut conn)
        .expect("insert a misfit payload");
        faults += 1;
    }
    // The API takes any JSON for a job type it does not know the Rust type of.
    enqueue(
        &mut conn,
        &NewJob::new("test.noop", r#"{"n": true}"#, JobOptions::new()).expect("valid JSON"),
    )
    .expect("enqueue");
    faults += 1;
    let misfit_count = misfits.len() as i64 + 1;

    // Text that is not JSON is refused at enqueue: by the API and the CLI.
    match NewJob::new("test.noop", "{not json", JobOptions::new()) {
        Err(Error::InvalidOption { field, reason }) => {
            assert_eq!(field, "payload");
            assert!(reason.contains("not valid JSON"), "{reason}");
        }
        other => panic!("not JSON accepted: {other:?}"),
    }
    cli_refuses(
        &db,
        &["enqueue", "test.noop", "{not json"],
        "invalid payload: not valid JSON",
    );
    faults += 2;

    // Oversized payloads are refused at enqueue, naming the limit in force.
    fn too_big<T: std::fmt::Debug>(result: jobqueue_core::Result<T>, limit: usize) {
        match result {
            Err(e @ Error::PayloadTooLarge { .. }) => {
                let text = e.to_string();
                assert!(
                    text.contains(&format!("over the limit of {limit} bytes")),
                    "{text}"
                );
            }
            other => panic!("oversized payload accepted: {other:?}"),
        }
    }
    too_big(
        Blob {
            data: "x".repeat(5000),
        }
        .enqueue(&mut conn),
        Blob::MAX_PAYLOAD_BYTES,
    );
    too_big(
        Noop { n: 123_456 }
            .options()
            .max_payload_bytes(8)
            .enqueue(&mut conn),
        8,
    );
    too_big(
        NewJob::new(
            "test.blob",
            &format!("\"{}\"", "x".repeat(1 << 20)),
            JobOptions::new(),
        ),
        1 << 20,
    );
    faults += 3;
    assert_eq!(count_where(&mut conn, "job_type = 'test.blob'"), 0);
    let fits = Blob {
        data: "x".repeat(4000),
    }
    .enqueue(&mut conn)
    .expect("a payload within the limit")
    .id();

    // Handlers that panic: retried, then failed with the panic's message.
    for _ in 0..2 {
        Panic {}.enqueue(&mut conn).expect("enqueue");
        faults += 1;
    }
    // A job type no runner handles: set aside as unhandled, no attempt used,
    // listed by `stats`.
    put(&mut conn, "nobody.handles.this", JobOptions::new());
    faults += 1;

    enqueue_noops(&mut conn, 0, 100);
    wait_for("every poison job settled", Duration::from_secs(30), || {
        count_where(&mut conn, "job_type = 'test.noop' AND status = 'failed'") == misfit_count
            && count_where(&mut conn, "job_type = 'test.panic' AND status = 'failed'") == 2
            && count_where(&mut conn, "status = 'completed'") == 101
    });
    // The runner goes on: another batch after all that.
    enqueue_noops(&mut conn, 100, 100);
    wait_for("the next batch done", Duration::from_secs(30), || {
        count_where(&mut conn, "status = 'completed'") == 201
    });
    assert!(runner.is_running(), "the runner still runs");

    let decode_errors = count_where(
        &mut conn,
        "job_type = 'test.noop' AND status = 'failed' AND attempts = 1
         AND last_error LIKE 'payload of job type `test.noop` does not decode as %'",
    );
    let panic_errors = count_where(
        &mut conn,
        "job_type = 'test.panic' AND status = 'failed' AND attempts = 2
         AND last_error LIKE 'handler for job type `test.panic` panicked: deliberate panic in attempt 2'
         AND jsonb_array_length(errors) = 2",
    );
    wait_for(
        "the unknown type set aside",
        Duration::from_secs(30),
        || count_where(&mut conn, "status = 'unhandled'") == 1,
    );
    let unknown_set_aside = count_where(
        &mut conn,
        "job_type = 'nobody.handles.this' AND status = 'unhandled' AND attempts = 0",
    );
    let stats = cli(&db, &["stats"]);
    let stats = String::from_utf8_lossy(&stats.stdout).into_owned();
    let listed = stats.lines().any(|l| {
        l.split_whitespace().take(8).collect::<Vec<_>>()
            == ["nobody.handles.this", "0", "0", "0", "0", "1", "0", "0"]
            && l.ends_with("(no live runner handles this type)")
    });
    assert!(
        listed,
        "stats lists the unknown type as unhandled:\n{stats}"
    );
    runner.terminate(Duration::from_secs(30));
    let stderr = runner.stderr();
    assert!(
        stderr.contains("deliberate panic in attempt 1"),
        "the panic is on stderr: {stderr}"
    );

    let good_done = count_where(
        &mut conn,
        "job_type = 'test.noop' AND status = 'completed' AND attempts = 1",
    ) + i64::from(
        jobqueue_core::get_job(&mut conn, fits)
            .expect("read")
            .found()
            .is_some_and(|j| j.status == jobqueue_core::JobStatus::Completed),
    );
    let lost = (201 - good_done)
        + (misfit_count - decode_errors)
        + (2 - panic_errors)
        + (1 - unknown_set_aside);
    let duplicated = scalar(
        &mut conn,
        "SELECT count(*) AS n FROM (SELECT job_id FROM test_effects
         WHERE kind = 'run' AND job_id IN (SELECT id FROM jobqueue_jobs
                                           WHERE job_type IN ('test.noop', 'test.blob'))
         GROUP BY job_id HAVING count(*) > 1) AS d",
    );
    Summary {
        scenario: "6 poison payloads",
        jobs: count_where(&mut conn, "true"),
        faults,
        lost,
        duplicated,
        detail: format!(
            "misfit_payloads_failed_at_once={decode_errors} panics_failed_after_retry={panic_errors} \
             unknown_type_set_aside={unknown_set_aside} refused_at_enqueue=5 good_jobs_done={good_done}"
        ),
    }
    .print_and_check();
    assert_eq!(effects_where(&mut conn, "kind = 'run'"), 201 + 2 * 2);
}

#[derive(QueryableByName)]
struct Key {
    #[diesel(sql_type = Nullable<Text>)]
    key: Option<String>,
}

fn texts(conn: &mut PgConnection, query: &str) -> Vec<String> {
    let mut texts: Vec<String> = diesel::sql_query(query)
        .load::<Key>(conn)
        .expect("read texts")
        .into_iter()
        .filter_map(|k| k.key)
        .collect();
    texts.sort();
    texts
}

#[test]
fn hostile_names_are_refused_or_kept_verbatim_and_never_run_as_sql() {
    let (db, mut conn) = setup();
    conn.batch_execute("CREATE TABLE canary (x int); INSERT INTO canary VALUES (1)")
        .expect("canary");
    let hostile_worker = "w'); DROP TABLE canary; --\n\"ünï\" \\ ;$$";
    let mut runner = Proc::runner(
        WORKER,
        &db.url,
        hostile_worker,
        &runner_flags(&[("poll-interval-ms", "200")]),
    );
    let mut faults = 0;
    let mut expected: Vec<String> = HOSTILE.iter().map(|s| (*s).to_owned()).collect();
    expected.sort();

    for name in HOSTILE {
        // Refused by the API, naming the field and the character at fault.
        let field = |result: jobqueue_core::Result<NewJob>| match result {
            Err(Error::InvalidOption { field, reason }) => {
                assert!(reason.contains("only A-Z, a-z, 0-9"), "{reason}");
                field
            }
            other => panic!("{name:?} accepted: {other:?}"),
        };
        assert_eq!(
            field(NewJob::new(
                "test.noop",
                "{}",
                JobOptions::new().queue(*name)
            )),
            "queue"
        );
        assert_eq!(
            field(NewJob::new(name, "{}", JobOptions::new())),
            "job type"
        );
        // Refused by the CLI, for enqueue and for work.
        cli_refuses(
            &db,
            &["enqueue", "test.noop", r#"{"n": 1}"#, "--queue", name],
            "invalid queue",
        );
        cli_refuses(&db, &["work", "--queues", name], "invalid queue");
        faults += 4;
    }

    // A producer bypassing the library (bound parameters, as any driver
    // sends them): the schema may refuse these rows or store them; stored,
    // they are data the runner handles like any other.
    let mut stored_queues = 0;
    let mut stored_types = 0;
    for name in HOSTILE {
        for column in ["queue", "job_type"] {
            let insert = diesel::sql_query(format!(
                "INSERT INTO jobqueue_jobs (id, job_type, queue, payload) VALUES
                 (gen_random_uuid(), {}, {}, '{{\"n\": 7}}')",
                if column == "job_type" {
                    "$1"
                } else {
                    "'test.noop'"
                },
                if column == "queue" { "$1" } else { "'default'" },
            ))
            .bind::<Text, _>(*name)
            .execute(&mut conn);
            match (insert, column) {
                (Ok(_), "queue") => stored_queues += 1,
                (Ok(_), _) => stored_types += 1,
                (Err(e), _) => assert!(e.to_string().contains("valid"), "{name:?}: {e}"),
            }
            faults += 1;
        }
    }

    // Free text (unique keys, payloads, a worker id, notifications, channel
    // names) is stored and handled as data.
    for (i, name) in HOSTILE.iter().enumerate() {
        Noop { n: i as u64 }
            .options()
            .unique_key(*name)
            .enqueue(&mut conn)
            .expect("a hostile unique key is just a key");
        Blob {
            data: (*name).to_owned(),
        }
        .enqueue(&mut conn)
        .expect("a hostile payload is just data");
        for channel in [jobqueue_core::engine::NOTIFY_CHANNEL, name] {
            diesel::sql_query("SELECT pg_notify($1, $2)")
                .bind::<Text, _>(channel)
                .bind::<Text, _>(*name)
                .execute(&mut conn)
                .expect("notify");
        }
        faults += 4;
    }
    let workable = 2 * HOSTILE.len() as i64 + stored_queues;
    wait_for(
        "every workable job done, the others set aside",
        Duration::from_secs(30),
        || {
            count_where(&mut conn, "status = 'completed'") == workable
                && count_where(&mut conn, "status = 'unhandled'") == stored_types
        },
    );
    // Reading by a hostile name is a query like any other.
    for name in HOSTILE {
        for filter in ["--queue", "--type"] {
            let out = cli(&db, &["list", filter, name]);
            let stderr = String::from_utf8_lossy(&out.stderr);
            assert!(
                out.status.success() || stderr.contains("invalid"),
                "list {filter} {name:?}: {stderr}"
            );
        }
    }
    let stats = cli(&db, &["stats"]);
    assert_success("stats", &stats);
    assert!(runner.is_running(), "the runner still runs");
    runner.terminate(Duration::from_secs(30));

    let keys = texts(
        &mut conn,
        "SELECT unique_key AS key FROM jobqueue_jobs WHERE unique_key IS NOT NULL",
    );
    assert_eq!(keys, expected, "unique keys kept verbatim");
    let payloads = texts(
        &mut conn,
        "SELECT payload->>'data' AS key FROM jobqueue_jobs WHERE job_type = 'test.blob'",
    );
    assert_eq!(payloads, expected, "payloads kept verbatim");
    if stored_queues > 0 {
        let queues = texts(
            &mut conn,
            "SELECT queue AS key FROM jobqueue_jobs WHERE status = 'completed'
               AND queue NOT IN ('default')",
        );
        assert_eq!(queues, expected, "stored queue names kept verbatim");
    }
    let by_hostile_worker = diesel::sql_query(
        "SELECT count(*) AS n FROM jobqueue_jobs WHERE worker_id = $1 AND status = 'completed'",
    )
    .bind::<Text, _>(hostile_worker)
    .get_result::<CountRow>(&mut conn)
    .expect("count")
    .n;
    let canary = scalar(&mut conn, "SELECT count(*) AS n FROM canary");
    let unknown_set_aside = count_where(
        &mut conn,
        "job_type NOT LIKE 'test.%' AND status = 'unhandled' AND attempts = 0",
    );

    let lost = (workable - by_hostile_worker) + (stored_types - unknown_set_aside);
    let duplicated = scalar(
        &mut conn,
        "SELECT count(*) AS n FROM (SELECT job_id FROM test_effects
         GROUP BY job_id HAVING count(*) > 1) AS d",
    );
    Summary {
        scenario: "6 hostile names",
        jobs: workable + stored_types,
        faults,
        lost,
        duplicated,
        detail: format!(
            "names_tried={} refused_by_api_and_cli={} stored_bypassing_api_queue={stored_queues} \
             stored_bypassing_api_type={stored_types} worker_id_kept_verbatim={by_hostile_worker} \
             canary_rows={canary}",
            HOSTILE.len(),
            HOSTILE.len()
        ),
    }
    .print_and_check();
    assert_eq!(canary, 1, "the canary table survived");
    assert_eq!(
        count_where(&mut conn, "true"),
        workable + stored_types,
        "no row appeared or vanished"
    );
}

#[derive(QueryableByName)]
struct CountRow {
    #[diesel(sql_type = diesel::sql_types::BigInt)]
    n: i64,
}
