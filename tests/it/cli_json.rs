//! `--json` on the CLI's read commands: each command's output parses, with
//! the field names the guide documents and the facts the text shows.

use diesel::PgConnection;
use jobqueue_core::engine::{RunnerInfo, declare_schedules, register_runner};
use jobqueue_core::{JobOptions, JobStatus, Periodic};
use jobqueue_tests::jobs::Noop;
use jobqueue_tests::{TestDb, enqueue_all_with, run_cli};
use serde_json::Value;

/// An application's worker binary: the operational commands.
const CLI: &str = env!("CARGO_BIN_EXE_jobqueue-test-worker");

fn ok(db: &TestDb, args: &[&str]) -> String {
    let (code, stdout, stderr) = run_cli(CLI, &db.url, args);
    assert_eq!(code, Some(0), "{args:?}: {stderr}");
    stdout
}

/// The one JSON document `args` prints.
fn document(db: &TestDb, args: &[&str]) -> Value {
    let out = ok(db, args);
    serde_json::from_str(&out).unwrap_or_else(|e| panic!("{args:?}: {e}\n{out}"))
}

/// Asserts that `value` is an object with exactly the fields `expected`.
fn assert_fields(value: &Value, expected: &[&str]) {
    let mut expected = expected.to_vec();
    expected.sort_unstable();
    let found: Vec<&str> = value
        .as_object()
        .unwrap_or_else(|| panic!("an object: {value}"))
        .keys()
        .map(String::as_str)
        .collect();
    assert_eq!(found, expected, "{value}");
}

/// The element of `array` whose `key` is `name`.
fn named<'a>(array: &'a Value, key: &str, name: &str) -> &'a Value {
    array
        .as_array()
        .unwrap_or_else(|| panic!("an array: {array}"))
        .iter()
        .find(|item| item[key] == name)
        .unwrap_or_else(|| panic!("no {key} {name} in {array}"))
}

/// A time as RFC 3339.
fn is_time(value: &Value) -> bool {
    value
        .as_str()
        .is_some_and(|t| chrono::DateTime::parse_from_rfc3339(t).is_ok())
}

/// Registers runner `worker_id` (on host-1, pid 4242, 8 workers, queue
/// mail, type email.send), and declares schedule `hourly` (`0 * * * *`,
/// test.noop) in time zone `zone`.
fn a_runner_and_a_schedule(conn: &mut PgConnection, worker_id: &str, zone: Option<&str>) {
    register_runner(
        conn,
        &RunnerInfo {
            worker_id: worker_id.into(),
            host: "host-1".into(),
            pid: 4242,
            version: jobqueue_core::VERSION.into(),
            queues: vec!["mail".into()],
            job_types: vec!["email.send".into()],
            concurrency: 8,
            lease: std::time::Duration::from_secs(30),
        },
    )
    .expect("register a runner");
    let hourly = Periodic::new("hourly", "0 * * * *", &Noop { n: 1 });
    let hourly = match zone {
        Some(zone) => hourly.time_zone(zone),
        None => hourly,
    };
    declare_schedules(conn, &[hourly]).expect("declare a schedule");
}

const JOB_FIELDS: [&str; 11] = [
    "id",
    "job_type",
    "queue",
    "status",
    "priority",
    "attempts",
    "max_attempts",
    "run_at",
    "created_at",
    "last_error",
    "tags",
];

#[test]
fn list_prints_one_json_object_per_job() {
    let (db, _conn) = TestDb::connected();
    let mail = ok(
        &db,
        &[
            "enqueue",
            "email.send",
            r#"{"to":"a@example.com","subject":"Hi"}"#,
        ],
    );
    let other = ok(
        &db,
        &["enqueue", "x.y", "{}", "--force", "--queue", "other"],
    );
    let cancelled = ok(&db, &["enqueue", "x.y", "{}", "--force"]);
    ok(&db, &["cancel", cancelled.trim()]);

    let out = ok(&db, &["list", "--json"]);
    let jobs: Vec<Value> = out
        .lines()
        .map(|line| serde_json::from_str(line).unwrap_or_else(|e| panic!("{e}: {line}")))
        .collect();
    // Newest first, as the text lists them.
    let ids: Vec<&str> = jobs.iter().map(|j| j["id"].as_str().expect("id")).collect();
    assert_eq!(ids, [cancelled.trim(), other.trim(), mail.trim()]);
    let text_ids: Vec<String> = ok(&db, &["list"])
        .lines()
        .skip(1)
        .filter_map(|line| line.split_whitespace().next().map(str::to_owned))
        .collect();
    assert_eq!(ids, text_ids);
    for job in &jobs {
        assert_fields(job, &JOB_FIELDS);
        assert!(
            is_time(&job["run_at"]) && is_time(&job["created_at"]),
            "{job}"
        );
    }
    let mail = &jobs[2];
    assert_eq!(mail["job_type"], "email.send");
    assert_eq!(mail["queue"], "mail");
    assert_eq!(mail["status"], "pending");
    assert_eq!(mail["priority"], 150);
    assert_eq!(mail["attempts"], 0);
    assert_eq!(mail["max_attempts"], 5);
    assert_eq!(mail["last_error"], Value::Null);
    assert_eq!(mail["tags"], serde_json::json!([]));
    assert_eq!(jobs[0]["status"], "cancelled");

    // The filters apply as to the text; nothing found is no line at all.
    let only = ok(&db, &["list", "--json", "--queue", "other"]);
    assert_eq!(only.lines().count(), 1, "{only}");
    assert_eq!(ok(&db, &["list", "--json", "--status", "failed"]), "");
}

#[test]
fn show_prints_the_whole_job() {
    let (db, mut conn) = TestDb::connected();
    let id = ok(
        &db,
        &[
            "enqueue",
            "x.y",
            r#"{"n":1,"text":"\u001b[2J"}"#,
            "--force",
            "--unique-key",
            "k1",
            "--concurrency-key",
            "customer:1",
        ],
    );
    let id = id.trim();
    let job = document(&db, &["show", id, "--json"]);
    assert_fields(
        &job,
        &[
            &JOB_FIELDS[..],
            &[
                "unique_key",
                "concurrency_key",
                "claimed_at",
                "started_at",
                "finished_at",
                "worker_id",
                "lease_expires_at",
                "cancel_requested",
                "progress",
                "current_stage",
                "events_count",
                "payload",
                "errors",
                "traceparent",
                "metadata",
                "step_outputs",
                "step_cursor",
                "result",
            ],
        ]
        .concat(),
    );
    assert_eq!(job["id"], id);
    assert_eq!(job["unique_key"], "k1");
    assert_eq!(job["concurrency_key"], "customer:1");
    assert_eq!(job["status"], "pending");
    assert_eq!(job["claimed_at"], Value::Null);
    assert_eq!(job["cancel_requested"], false);
    assert_eq!(job["progress"], 0);
    // The payload as stored: JSON, control characters and all.
    assert_eq!(
        job["payload"],
        serde_json::json!({"n": 1, "text": "\u{1b}[2J"})
    );
    assert_eq!(job["errors"], serde_json::json!([]));

    // A failed attempt: its error, when and by whom.
    let lease = jobqueue_tests::claim_one(&mut conn, "worker-1");
    jobqueue_core::engine::fail(
        &mut conn,
        &jobqueue_core::engine::Failure::permanent(lease, "boom"),
    )
    .expect("fail the job");
    let job = document(&db, &["show", id, "--json"]);
    assert_eq!(job["status"], JobStatus::Failed.as_str());
    assert_eq!(job["attempts"], 1);
    assert_eq!(job["last_error"], "boom");
    assert_eq!(job["worker_id"], "worker-1");
    assert!(
        is_time(&job["claimed_at"]) && is_time(&job["finished_at"]),
        "{job}"
    );
    assert_eq!(job["errors"][0]["error"], "boom");
    assert_eq!(job["errors"][0]["attempt"], 1);
}

#[test]
fn stats_queue_list_runners_and_cron_list_print_one_document_each() {
    let (db, mut conn) = TestDb::connected();
    ok(
        &db,
        &[
            "enqueue",
            "email.send",
            r#"{"to":"a@example.com","subject":"Hi"}"#,
        ],
    );
    ok(
        &db,
        &["enqueue", "x.y", "{}", "--force", "--delay-secs", "600"],
    );
    ok(&db, &["queue", "limit", "mail", "5"]);
    ok(&db, &["queue", "pause", "media"]);
    ok(&db, &["queue", "rate", "mail", "100/1m"]);
    // Queue orders: three jobs of one key wait behind an ordered limit;
    // raised to 2 per key, two of them are admitted.
    enqueue_all_with(
        &mut conn,
        [Noop { n: 0 }],
        &JobOptions::new().queue("orders"),
    );
    ok(&db, &["queue", "keys", "orders", "ordered"]);
    enqueue_all_with(
        &mut conn,
        (1..=3).map(|n| Noop { n }),
        &JobOptions::new()
            .queue("orders")
            .concurrency_key("customer:42"),
    );
    ok(&db, &["queue", "keys", "orders", "2"]);
    a_runner_and_a_schedule(&mut conn, "runner-1", Some("Europe/Paris"));

    let stats = document(&db, &["stats", "--json"]);
    assert_fields(&stats, &["history", "queues", "completed", "types"]);
    assert_eq!(stats["history"], false);
    let mail = named(&stats["queues"], "queue", "mail");
    assert_fields(mail, &["queue", "counts", "oldest_due_secs"]);
    assert_fields(&mail["counts"], &JobStatus::ALL.map(JobStatus::as_str));
    assert_eq!(mail["counts"]["pending"], 1);
    assert_eq!(mail["counts"]["failed"], 0);
    assert_eq!(mail["counts"]["completed"], Value::Null, "not counted");
    assert!(mail["oldest_due_secs"].as_f64().is_some(), "{mail}");
    let default = named(&stats["queues"], "queue", "default");
    assert_eq!(default["counts"]["scheduled"], 1);
    assert_eq!(default["oldest_due_secs"], Value::Null, "none due");
    assert_eq!(
        stats["completed"],
        serde_json::json!({"last_hour": 0, "last_day": 0})
    );
    let email = named(&stats["types"], "job_type", "email.send");
    assert_fields(
        &email["counts"],
        &[
            "blocked",
            "waiting",
            "scheduled",
            "pending",
            "unhandled",
            "claimed",
            "running",
        ],
    );
    assert_eq!(email["counts"]["pending"], 1);
    assert_eq!(email["handled"], true);
    assert_eq!(named(&stats["types"], "job_type", "x.y")["handled"], false);
    let history = document(&db, &["stats", "--history", "--json"]);
    assert_eq!(history["history"], true);
    assert_eq!(
        named(&history["queues"], "queue", "mail")["counts"]["completed"],
        0
    );

    let queues = document(&db, &["queue", "list", "--json"]);
    assert_fields(&queues, &["queues"]);
    let mail = named(&queues["queues"], "queue", "mail");
    assert_fields(
        mail,
        &[
            "queue",
            "paused",
            "due",
            "scheduled",
            "unhandled",
            "held",
            "failed",
            "oldest_due_secs",
            "limit",
            "rate_limit",
            "rate_started",
            "backoff_secs",
            "key_limit",
            "keys_held",
            "waiting_on_key",
            "blocked_on_parents",
            "overrides",
        ],
    );
    assert_eq!(mail["paused"], false);
    assert_eq!(mail["due"], 1);
    assert_eq!(mail["limit"], 5);
    assert_eq!(
        mail["rate_limit"],
        serde_json::json!({"starts": 100, "period_secs": 60.0})
    );
    assert_eq!(mail["rate_started"], 0);
    assert_eq!(mail["backoff_secs"], Value::Null);
    let media = named(&queues["queues"], "queue", "media");
    assert_eq!(media["paused"], true);
    assert_eq!(media["due"], 0);
    assert_eq!(media["limit"], Value::Null);
    assert_eq!(media["rate_limit"], Value::Null);
    assert_eq!(media["rate_started"], Value::Null);
    assert_eq!(media["key_limit"], Value::Null);
    assert_eq!(media["keys_held"], Value::Null);
    assert_eq!(media["waiting_on_key"], 0);
    let orders = named(&queues["queues"], "queue", "orders");
    assert_eq!(
        orders["key_limit"],
        serde_json::json!({"per_key": 2, "ordered": false})
    );
    assert_eq!(orders["keys_held"], 1);
    assert_eq!(orders["waiting_on_key"], 1);
    assert_eq!(orders["due"], 3, "the unkeyed job and the two admitted");

    let runners = document(&db, &["runners", "--json"]);
    assert_fields(&runners, &["runners"]);
    let runner = named(&runners["runners"], "worker_id", "runner-1");
    assert_fields(
        runner,
        &[
            "worker_id",
            "host",
            "pid",
            "version",
            "concurrency",
            "queues",
            "job_types",
            "started_at",
            "last_seen",
            "silent_secs",
            "state",
        ],
    );
    assert_eq!(runner["host"], "host-1");
    assert_eq!(runner["pid"], 4242);
    assert_eq!(runner["concurrency"], 8);
    assert_eq!(runner["queues"], serde_json::json!(["mail"]));
    assert_eq!(runner["job_types"], serde_json::json!(["email.send"]));
    assert_eq!(runner["state"], "live");
    assert!(is_time(&runner["last_seen"]), "{runner}");

    let schedules = document(&db, &["cron", "list", "--json"]);
    assert_fields(&schedules, &["schedules"]);
    let hourly = named(&schedules["schedules"], "name", "hourly");
    assert_fields(
        hourly,
        &[
            "name",
            "cron",
            "time_zone",
            "job_type",
            "queue",
            "last_slot",
            "next_slot",
            "state",
        ],
    );
    assert_eq!(hourly["cron"], "0 * * * *");
    assert_eq!(hourly["time_zone"], "Europe/Paris");
    assert_eq!(hourly["job_type"], "test.noop");
    assert_eq!(hourly["state"], "active");
    assert!(is_time(&hourly["next_slot"]), "{hourly}");
    ok(&db, &["cron", "pause", "hourly"]);
    let schedules = document(&db, &["cron", "list", "--json"]);
    assert_eq!(
        named(&schedules["schedules"], "name", "hourly")["state"],
        "paused"
    );
}

#[test]
fn empty_listings_are_empty_arrays() {
    let db = TestDb::new();
    assert_eq!(
        document(&db, &["queue", "list", "--json"]),
        serde_json::json!({"queues": []})
    );
    assert_eq!(
        document(&db, &["runners", "--json"]),
        serde_json::json!({"runners": []})
    );
    assert_eq!(
        document(&db, &["cron", "list", "--json"]),
        serde_json::json!({"schedules": []})
    );
    assert_eq!(
        document(&db, &["stats", "--json"]),
        serde_json::json!({
            "history": false,
            "queues": [],
            "completed": {"last_hour": 0, "last_day": 0},
            "types": []
        })
    );
    assert_eq!(ok(&db, &["list", "--json"]), "");
}

#[test]
fn doctor_json_keeps_its_exit_code() {
    let bare = TestDb::unmigrated();
    let (code, out, stderr) = run_cli(CLI, &bare.url, &["doctor", "--json"]);
    assert_eq!(code, Some(1), "{stderr}");
    let report: Value = serde_json::from_str(&out).expect("JSON");
    assert_fields(&report, &["status", "checks"]);
    assert_eq!(report["status"], "fail");
    assert_fields(
        &report["checks"][0],
        &["name", "status", "evidence", "advice"],
    );
    let db = TestDb::new();
    let report = document(&db, &["doctor", "--json"]);
    assert_ne!(report["status"], "fail", "{report}");
}

/// The shape of `value`: its fields, recursively (an array's by its first
/// element), with every value but objects and arrays left out.
fn shape(value: &Value) -> Value {
    match value {
        Value::Object(fields) => fields
            .iter()
            .map(|(name, field)| (name.clone(), shape(field)))
            .collect::<serde_json::Map<_, _>>()
            .into(),
        Value::Array(items) => Value::Array(items.first().map(shape).into_iter().collect()),
        _ => Value::Null,
    }
}

/// The guide's sample of each `--json` command: the JSON block after the
/// paragraph that starts with "`jobqueue COMMAND --json`".
fn guide_samples() -> Vec<(String, Vec<Value>)> {
    let page = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/docs/src/operations/command.md"
    ))
    .expect("read the guide's command page");
    let mut samples = Vec::new();
    let mut command = None;
    let mut lines = page.lines();
    while let Some(line) = lines.next() {
        if let Some(rest) = line.strip_prefix("`jobqueue ") {
            command = rest
                .split_once(" --json`")
                .map(|(name, _)| name.replace(" ID", ""));
        } else if line == "```json" {
            let block: Vec<&str> = lines.by_ref().take_while(|l| *l != "```").collect();
            let name = command
                .take()
                .expect("a JSON sample follows its command's name");
            let documents = if name == "list" || name == "workflow list" {
                block
                    .iter()
                    .map(|l| serde_json::from_str(l).expect("a JSON line"))
                    .collect()
            } else {
                vec![serde_json::from_str(&block.join("\n")).expect("a JSON document")]
            };
            samples.push((name, documents));
        }
    }
    samples
}

#[test]
fn the_guide_shows_the_fields_each_command_prints() {
    let (db, mut conn) = TestDb::connected();
    let id = ok(
        &db,
        &[
            "enqueue",
            "email.send",
            r#"{"to":"a@example.com","subject":"Welcome"}"#,
            "--unique-key",
            "welcome-42",
            "--tag",
            "tenant:42",
            "--meta",
            "user=7",
        ],
    );
    ok(
        &db,
        &["enqueue", "x.y", "{}", "--force", "--delay-secs", "600"],
    );
    a_runner_and_a_schedule(&mut conn, "web-1", None);
    // Not due for ten minutes, as the `x.y` job above: the doctor warns.
    let later = jobqueue_core::JobOptions::new().delay(std::time::Duration::from_secs(600));
    let step = || jobqueue_core::NewJob::new("x.y", "{}", later.clone());
    let mut flow = jobqueue_core::Workflow::new("publish video 7").expect("workflow");
    let first = flow
        .add_job("transcode", step().expect("job"))
        .expect("step");
    let then = flow.add_job("publish", step().expect("job")).expect("step");
    flow.after(then, [first]).expect("edge");
    let workflow = flow.enqueue(&mut conn).expect("enqueue").id.to_string();

    let samples = guide_samples();
    let names: Vec<&str> = samples.iter().map(|(name, _)| name.as_str()).collect();
    assert_eq!(
        names,
        [
            "list",
            "show",
            "stats",
            "queue list",
            "runners",
            "cron list",
            "workflow list",
            "workflow show",
            "doctor"
        ]
    );
    for (name, documents) in &samples {
        let mut args: Vec<&str> = name.split(' ').collect();
        if name == "show" {
            args.push(id.trim());
        }
        if name == "workflow show" {
            args.push(&workflow);
        }
        args.push("--json");
        let out = ok(&db, &args);
        let printed: Vec<Value> = if name == "list" || name == "workflow list" {
            out.lines()
                .map(|l| serde_json::from_str(l).expect("a JSON line"))
                .collect()
        } else {
            vec![serde_json::from_str(&out).expect("a JSON document")]
        };
        assert_eq!(
            shape(&printed[0]),
            shape(&documents[0]),
            "the guide's `{name} --json` sample"
        );
    }
}
