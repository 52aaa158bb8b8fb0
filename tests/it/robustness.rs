//! Generated input against the dashboard's routes and the command line's
//! arguments: whatever arrives, the dashboard answers with a page and a
//! status that says whose fault it was (never a 500, which would be a
//! defect), and the command line exits 0, 1 (the database or a job's
//! state) or 2 (the command line), with one line saying why, and never
//! panics. Failing cases shrink to a smallest one and are printed.

use jobqueue_core::{JobOptions, NewJob, enqueue_many};
use jobqueue_dashboard::{Dashboard, DashboardConfig, Method, Request};
use jobqueue_tests::{TestDb, run_cli};
use proptest::prelude::*;
use proptest::test_runner::{Config, TestRunner};

const CLI: &str = env!("CARGO_BIN_EXE_jobqueue-test-worker");

/// Text a hostile client would send: path and query punctuation, escapes,
/// NUL, control characters, non-ASCII, and plain words.
const SPECIALS: [&str; 20] = [
    "",
    "..",
    ".",
    "%",
    "%00",
    "%ff",
    "%2F",
    "%2e%2e",
    "\u{0}",
    "\u{1b}[2J",
    "\u{202e}",
    "é",
    "?",
    "#",
    "&",
    "=",
    "+",
    "/",
    "//",
    "x/../../failed/retry?",
];

/// What the pages read from a query or a form.
const KEYS: [&str; 14] = [
    "status", "queue", "type", "key", "order", "cursor", "id", "notice", "token", "name", "csrf",
    "confirm", "rate", "limit",
];

const ROUTES: [&str; 19] = [
    "/",
    "/jobs",
    "/jobs/",
    "/failed",
    "/failed/retry",
    "/schedules",
    "/queues",
    "/queues/pause",
    "/queues/resume",
    "/queues/rate",
    "/queues/remove-rate",
    "/queues/limit",
    "/queues/remove-limit",
    "/schedules/pause",
    "/schedules/run",
    "/login",
    "/static/style.css",
    "/jobs/0195f1a4-0000-7000-8000-000000000000",
    "/jobs/0195f1a4-0000-7000-8000-000000000000/retry",
];

fn hostile_text() -> impl Strategy<Value = String> {
    prop_oneof![
        4 => prop::sample::select(SPECIALS.to_vec()).prop_map(str::to_owned),
        2 => "[a-z.]{0,12}",
        1 => "[ -~]{0,24}",
        1 => any::<String>(),
    ]
}

fn route() -> impl Strategy<Value = String> {
    let fixed = prop::sample::select(ROUTES.to_vec());
    (fixed, prop::collection::vec(hostile_text(), 0..3)).prop_map(|(base, extra)| {
        let mut path = base.to_owned();
        for segment in extra {
            path.push('/');
            path.push_str(&segment);
        }
        path
    })
}

fn params() -> impl Strategy<Value = Vec<(String, String)>> {
    let key = prop::sample::select(KEYS.to_vec()).prop_map(str::to_owned);
    prop::collection::vec(
        (prop_oneof![3 => key, 1 => hostile_text()], hostile_text()),
        0..5,
    )
}

/// `pairs` as a query string or form body: encoded, or raw as a careless
/// client would send them.
fn encoded(pairs: &[(String, String)], raw: bool) -> String {
    pairs
        .iter()
        .map(|(k, v)| {
            if raw {
                format!("{k}={v}")
            } else {
                format!(
                    "{}={}",
                    jobqueue_tests::raw_http::percent_encode(k),
                    jobqueue_tests::raw_http::percent_encode(v)
                )
            }
        })
        .collect::<Vec<_>>()
        .join("&")
}

#[test]
fn the_dashboard_answers_every_generated_request_with_a_page_and_no_500() {
    let db = TestDb::new();
    let mut conn = db.conn();
    let jobs: Vec<NewJob> = (0..5)
        .map(|i| {
            NewJob::new(
                "mail.send",
                &format!("{{\"n\":{i}}}"),
                JobOptions::new().queue("mail"),
            )
            .expect("a job")
        })
        .collect();
    enqueue_many(&mut conn, &jobs).expect("enqueue");
    let dashboard = Dashboard::new(DashboardConfig::new(&db.url)).expect("dashboard");
    let host = Some("127.0.0.1".to_owned());
    let mut home = Request::new(Method::Get, "/");
    home.host = host.clone();
    let front = dashboard.handle(&home);
    let page = String::from_utf8_lossy(&front.body).into_owned();
    let csrf = jobqueue_tests::csrf_token(&page);

    let answer_of = |method: Method, target: String, form: String, origin: Option<String>| {
        let mut request = Request::new(method, target);
        request.host = host.clone();
        request.origin = origin;
        request.body = form.into_bytes();
        let answer = dashboard.handle(&request);
        if answer.status == 500 || !(200..500).contains(&answer.status) {
            return Err(format!(
                "{:?} {} form {:?}: {}\n{}",
                request.method,
                request.path,
                String::from_utf8_lossy(&request.body),
                answer.status,
                String::from_utf8_lossy(&answer.body)
            ));
        }
        Ok(())
    };

    // Every route with every parameter set to every special value, in the
    // query of a GET and the form of a POST (with the CSRF token), raw and
    // encoded.
    let mut grid = 0;
    for route in ROUTES {
        for key in KEYS {
            for value in SPECIALS {
                for raw in [false, true] {
                    let pair = [(key.to_owned(), value.to_owned())];
                    let query = format!("{route}?{}", encoded(&pair, raw));
                    answer_of(Method::Get, query, String::new(), None)
                        .unwrap_or_else(|e| panic!("{e}"));
                    let form = format!("{}&csrf={csrf}", encoded(&pair, raw));
                    answer_of(Method::Post, route.to_owned(), form, None)
                        .unwrap_or_else(|e| panic!("{e}"));
                    grid += 2;
                }
            }
        }
    }
    assert_eq!(grid, ROUTES.len() * KEYS.len() * SPECIALS.len() * 4);

    // Then generated requests: several parameters, extra path segments,
    // any text, a foreign origin now and then.
    let request = (
        prop::sample::select(vec![Method::Get, Method::Post, Method::Other]),
        route(),
        params(),
        params(),
        any::<bool>(),
        any::<bool>(),
        prop::option::of(hostile_text()),
    );
    let mut runner = TestRunner::new(Config {
        cases: 1500,
        failure_persistence: None,
        ..Config::default()
    });
    runner
        .run(
            &request,
            |(method, path, query, mut form, raw, with_csrf, origin)| {
                if with_csrf {
                    form.push(("csrf".to_owned(), csrf.clone()));
                }
                let target = if query.is_empty() {
                    path
                } else {
                    format!("{path}?{}", encoded(&query, raw))
                };
                let origin = origin.map(|o| format!("http://{o}"));
                answer_of(method, target, encoded(&form, raw), origin)
                    .map_err(proptest::test_runner::TestCaseError::fail)
            },
        )
        .unwrap_or_else(|e| panic!("{e}"));
}

fn command_line() -> impl Strategy<Value = Vec<String>> {
    let id = prop_oneof![
        Just("0195f1a4-0000-7000-8000-000000000000".to_owned()),
        hostile_text(),
    ];
    let command = prop::sample::select(vec![
        vec!["enqueue", "email.send"],
        vec!["enqueue", "other.type", "--force"],
        vec!["list"],
        vec!["show"],
        vec!["stats"],
        vec!["retry"],
        vec!["cancel"],
        vec!["delete"],
        vec!["prune"],
        vec!["queue", "list"],
        vec!["queue", "pause"],
        vec!["queue", "limit"],
        vec!["cron", "list"],
        vec!["cron", "run"],
        vec!["runners"],
        vec!["doctor"],
    ]);
    let flag = prop::sample::select(vec![
        "--queue",
        "--priority",
        "--max-attempts",
        "--unique-key",
        "--run-at",
        "--delay-secs",
        "--status",
        "--type",
        "--limit",
        "--json",
        "--none",
        "--history",
    ]);
    (
        command,
        prop::collection::vec(
            prop_oneof![flag.prop_map(str::to_owned), hostile_text(), id],
            0..4,
        ),
    )
        .prop_map(|(command, rest)| {
            command
                .into_iter()
                .map(str::to_owned)
                .chain(rest)
                // An argument cannot hold NUL (the OS refuses it).
                .map(|arg| arg.replace('\0', ""))
                .collect()
        })
}

#[test]
fn the_command_line_exits_0_1_or_2_with_its_reason_for_every_generated_command() {
    let db = TestDb::new();
    let mut runner = TestRunner::new(Config {
        cases: 200,
        failure_persistence: None,
        ..Config::default()
    });
    runner
        .run(&command_line(), |args| {
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            let (code, _, stderr) = run_cli(CLI, &db.url, &args);
            prop_assert!(
                matches!(code, Some(0..=2)),
                "{args:?} exited {code:?}: {stderr}"
            );
            prop_assert!(!stderr.contains("panicked"), "{args:?}: {stderr}");
            if code != Some(0) {
                prop_assert!(!stderr.trim().is_empty(), "{args:?} failed silently");
            }
            Ok(())
        })
        .unwrap_or_else(|e| panic!("{e}"));
}
