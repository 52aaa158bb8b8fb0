//! The dashboard over HTTP: every page answers, filters and pages, actions
//! change the database through the library calls (queue limits, key
//! limits included, shown and set, bad ones refused with the library's
//! reason), and what must be refused is: a POST without its CSRF token,
//! any action when read-only, a request without the access token, a
//! non-loopback address without one. A queue's settings changed at run
//! time from what the code declares are noted in its row.
//! Hostile text from the database is escaped.

use jobqueue_core::{JobOptions, JobStatus, KeyLimit, NewJob, enqueue_many};
use jobqueue_dashboard::{Dashboard, DashboardConfig, DashboardError, DashboardServer, serve};
use jobqueue_tests::{TestDb, assert_contains, count_where, exec, read_job};

/// A dashboard on a port of its own, and an HTTP client that reports
/// statuses and redirects as they are.
struct Site {
    server: DashboardServer,
    agent: ureq::Agent,
}

/// What a request got back.
struct Got {
    status: u16,
    location: Option<String>,
    body: String,
}

impl Site {
    fn start(config: DashboardConfig) -> Self {
        let dashboard = Dashboard::new(config).expect("dashboard");
        let server = serve(dashboard, "127.0.0.1:0".parse().expect("address")).expect("serve");
        let agent = ureq::Agent::config_builder()
            .http_status_as_error(false)
            .max_redirects(0)
            .max_redirects_will_error(false)
            .build()
            .into();
        Site { server, agent }
    }

    fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.server.addr())
    }

    fn got(response: ureq::http::Response<ureq::Body>) -> Got {
        let status = response.status().as_u16();
        let location = response
            .headers()
            .get("location")
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned);
        let body = response.into_body().read_to_string().expect("a text body");
        Got {
            status,
            location,
            body,
        }
    }

    fn get(&self, path: &str) -> Got {
        Self::got(self.agent.get(self.url(path)).call().expect("GET"))
    }

    fn post(&self, path: &str, form: &[(&str, &str)]) -> Got {
        Self::got(
            self.agent
                .post(self.url(path))
                .send_form(form.iter().copied())
                .expect("POST"),
        )
    }

    /// Posts `form` to `path`, expects the action's redirect, and returns
    /// the page it leads to.
    fn acted(&self, path: &str, form: &[(&str, &str)]) -> String {
        let done = self.post(path, form);
        assert_eq!(done.status, 303, "{path}: {}", done.body);
        self.get(done.location.as_deref().expect("a redirect")).body
    }

    /// The CSRF token the page at `path` carries in its forms.
    fn csrf(&self, path: &str) -> String {
        jobqueue_tests::csrf_token(&self.get(path).body)
    }
}

fn put(
    conn: &mut diesel::PgConnection,
    n: usize,
    job_type: &str,
    options: JobOptions,
) -> Vec<jobqueue_core::JobId> {
    let jobs: Vec<NewJob> = (0..n)
        .map(|i| NewJob::new(job_type, &format!("{{\"n\":{i}}}"), options.clone()).expect("job"))
        .collect();
    enqueue_many(conn, &jobs).expect("enqueue").inserted
}

fn fail_for_good(conn: &mut diesel::PgConnection, condition: &str) {
    use diesel::RunQueryDsl;
    diesel::sql_query(format!(
        "UPDATE jobqueue_jobs SET status = 'failed', finished_at = now(), attempts = 1, \
         last_error = 'boom', lease_expires_at = NULL WHERE {condition}"
    ))
    .execute(conn)
    .expect("fail");
}

#[test]
fn every_page_answers_and_the_job_list_filters_and_pages() {
    let (db, mut conn) = TestDb::connected();
    let site = Site::start(DashboardConfig::new(&db.url));
    put(&mut conn, 120, "mail.send", JobOptions::new().queue("mail"));
    put(
        &mut conn,
        3,
        "media.encode",
        JobOptions::new().queue("media"),
    );
    for path in [
        "/",
        "/jobs",
        "/failed",
        "/schedules",
        "/static/style.css",
        "/static/app.js",
    ] {
        assert_eq!(site.get(path).status, 200, "{path}");
    }
    let overview = site.get("/").body;
    assert!(overview.contains("data-queue=\"mail\"") && overview.contains("data-queue=\"media\""));

    // 120 mail jobs: three pages of 50, 50, 20, newest first, none twice.
    let mut seen = Vec::new();
    let mut path = "/jobs?queue=mail".to_owned();
    loop {
        let page = site.get(&path).body;
        assert!(page.contains("120 jobs match"), "{page}");
        seen.extend(
            page.match_indices("data-id=\"")
                .map(|(at, m)| page[at + m.len()..at + m.len() + 36].to_owned()),
        );
        match page.find("id=\"next\" href=\"") {
            Some(at) => {
                let rest = &page[at + "id=\"next\" href=\"".len()..];
                path = rest[..rest.find('"').expect("end")].replace("&amp;", "&");
            }
            None => break,
        }
    }
    assert_eq!(seen.len(), 120);
    let mut sorted = seen.clone();
    sorted.sort();
    sorted.reverse();
    assert_eq!(seen, sorted, "newest first, across pages");
    sorted.dedup();
    assert_eq!(sorted.len(), 120, "no job on two pages");

    let media = site.get("/jobs?type=media.encode").body;
    assert!(media.contains("3 jobs match"), "{media}");
    let by_run_at = site.get("/jobs?status=pending&order=run_at");
    assert_eq!(by_run_at.status, 200);
    let refused = site.get("/jobs?order=run_at");
    assert_eq!(refused.status, 400, "run_at order needs a live status");
    assert_contains(&refused.body, &["needs a live status"]);
    assert_eq!(site.get("/jobs?status=nonsense").status, 400);
    // A NUL byte is an input error, not a database error.
    let nul = site.get("/jobs?key=a%00b");
    assert_eq!(nul.status, 400, "{}", nul.body);
    assert!(nul.body.contains("must not contain NUL"), "{}", nul.body);
    assert_eq!(site.get("/jobs/not-an-id").status, 404);
    assert_eq!(site.get("/nowhere").status, 404);
    let one = seen[0].clone();
    let by_id = site.get(&format!("/jobs?id={one}")).body;
    assert!(by_id.contains(&format!("Job {one}")), "{by_id}");
}

#[test]
fn completed_jobs_that_are_not_kept_are_counted_and_their_absence_explained() {
    let (db, mut conn) = TestDb::connected();
    let ids = put(&mut conn, 3, "mail.send", JobOptions::new().queue("mail"));
    let claimed =
        jobqueue_core::engine::claim(&mut conn, &jobqueue_core::engine::Claim::new("w").limit(3))
            .expect("claim");
    let leases: Vec<_> = claimed.iter().map(|job| job.lease()).collect();
    let done =
        jobqueue_core::engine::complete_and_delete_many(&mut conn, &leases).expect("complete");
    assert_eq!(done.applied.len(), 3);
    let site = Site::start(DashboardConfig::new(&db.url));
    // The chart counts them though their rows are gone.
    let overview = site.get("/").body;
    assert!(overview.contains(": 3 completed, 0 failed"), "{overview}");
    // The list of completed jobs says why it is empty; the job's page why
    // there is none.
    let list = site.get("/jobs?status=completed").body;
    assert!(list.contains("id=\"completed-not-kept\""), "{list}");
    assert!(
        !site
            .get("/jobs?status=failed")
            .body
            .contains("completed-not-kept")
    );
    let job = site.get(&format!("/jobs/{}", ids[0]));
    assert_eq!(job.status, 404);
    assert!(job.body.contains("row is gone"), "{}", job.body);
    // One whose result is kept for its enqueuer shows it, row or no row.
    let kept = put(&mut conn, 2, "mail.send", JobOptions::new().queue("kept"));
    let claimed = jobqueue_core::engine::claim(
        &mut conn,
        &jobqueue_core::engine::Claim::new("kept").limit(2),
    )
    .expect("claim");
    for (job, delete) in claimed.iter().zip([true, false]) {
        let done = jobqueue_core::engine::StepDone {
            lease: job.lease(),
            result: Some(format!(r#"{{"sent": "{}"}}"#, job.id)),
        };
        jobqueue_core::engine::complete_with_result(&mut conn, &done, delete, None)
            .expect("complete with its result");
    }
    assert_eq!(kept.len(), 2);
    let sent = |id: jobqueue_core::JobId| format!("&quot;sent&quot;:&quot;{id}&quot;");
    let gone = site.get(&format!("/jobs/{}", claimed[0].id));
    assert_eq!(gone.status, 404);
    assert_contains(
        &gone.body,
        &[
            "completed and its row was deleted",
            "the result kept for its enqueuer",
            &sent(claimed[0].id),
        ],
    );
    let row = site.get(&format!("/jobs/{}", claimed[1].id)).body;
    assert_contains(&row, &["id=\"job-result\"", &sent(claimed[1].id)]);
    // An id jobqueue never issued says so.
    let never = site.get("/jobs/6ba7b810-9dad-41d1-80b4-00c04fd430c8");
    assert_eq!(never.status, 404);
    assert_contains(&never.body, &["jobqueue never issued it"]);
}

#[test]
fn actions_change_the_database_and_say_what_they_did() {
    let (db, mut conn) = TestDb::connected();
    let site = Site::start(DashboardConfig::new(&db.url));
    let ids = put(&mut conn, 4, "mail.send", JobOptions::new().queue("mail"));
    fail_for_good(&mut conn, "true");
    // The last hour's chart has this minute's failures.
    let overview = site.get("/").body;
    assert!(overview.contains(": 0 completed, 4 failed"), "{overview}");
    assert!(overview.contains("<rect class=\"failed\""), "{overview}");

    // Retry one failed job.
    let csrf = site.csrf(&format!("/jobs/{}", ids[0]));
    let done = site.post(&format!("/jobs/{}/retry", ids[0]), &[("csrf", &csrf)]);
    assert_eq!(done.status, 303);
    assert!(
        done.location
            .as_deref()
            .is_some_and(|l| l.contains("notice="))
    );
    assert_eq!(read_job(&mut conn, ids[0]).status, JobStatus::Pending);

    // Cancel it again, then delete it.
    site.post(&format!("/jobs/{}/cancel", ids[0]), &[("csrf", &csrf)]);
    assert_eq!(read_job(&mut conn, ids[0]).status, JobStatus::Cancelled);
    let deleted = site.post(&format!("/jobs/{}/delete", ids[0]), &[("csrf", &csrf)]);
    assert_eq!(deleted.status, 303);
    assert_eq!(count_where(&mut conn, &format!("id = '{}'", ids[0])), 0);
    // A live job cannot be deleted: said so, nothing changed.
    let live = put(&mut conn, 1, "mail.send", JobOptions::new().queue("mail"))[0];
    let refused = site.post(&format!("/jobs/{live}/delete"), &[("csrf", &csrf)]);
    assert_eq!(refused.status, 409);
    assert_contains(&refused.body, &["only finished jobs"]);

    // Retry every failed job of the queue, after seeing how many.
    let confirm = site.get("/failed/retry?queue=mail").body;
    assert_contains(&confirm, &["<strong>3</strong> failed jobs"]);
    let all = site.post("/failed/retry", &[("csrf", &csrf), ("queue", "mail")]);
    assert_eq!(all.status, 303);
    assert_eq!(count_where(&mut conn, "status = 'failed'"), 0);
    assert_eq!(count_where(&mut conn, "status = 'pending'"), 4);

    // Pause and resume the queue.
    site.post("/queues/mail/pause", &[("csrf", &csrf)]);
    let paused = site.get("/").body;
    assert!(paused.contains("status paused"), "{paused}");
    site.post("/queues/mail/resume", &[("csrf", &csrf)]);
    assert!(!site.get("/").body.contains("status paused"));
}

/// The overview's row of `queue`.
fn queue_row<'a>(page: &'a str, queue: &str) -> &'a str {
    let start = page
        .find(&format!("data-queue=\"{queue}\""))
        .unwrap_or_else(|| panic!("no row of {queue} in:\n{page}"));
    let row = &page[start..];
    &row[..row.find("</tr>").expect("the row's end")]
}

/// The rate limit and global limit of `queue`, as the library lists them.
fn limits_of(
    conn: &mut diesel::PgConnection,
    queue: &str,
) -> (Option<jobqueue_core::RateLimit>, Option<i32>) {
    let queues = jobqueue_core::list_queues(conn, Default::default()).expect("list");
    let q = queues
        .iter()
        .find(|q| q.queue == queue)
        .unwrap_or_else(|| panic!("no queue {queue}"));
    (q.rate_limit, q.global_limit)
}

#[test]
fn queue_limits_are_shown_and_their_forms_set_and_remove_them() {
    use diesel::RunQueryDsl;
    let (db, mut conn) = TestDb::connected();
    put(&mut conn, 2, "mail.send", JobOptions::new().queue("mail"));
    put(&mut conn, 1, "api.call", JobOptions::new().queue("api"));
    let site = Site::start(DashboardConfig::new(&db.url));
    let overview = site.get("/").body;
    assert_contains(&overview, &["id=\"set-rate\"", "id=\"set-limit\""]);
    assert!(!overview.contains("Remove rate"), "nothing to remove yet");
    let csrf = jobqueue_tests::csrf_token(&overview);

    // Set a rate on mail, a global limit on api; each says what it did.
    let back = site.acted(
        "/queues/rate",
        &[("csrf", &csrf), ("name", "mail"), ("rate", "50/1h")],
    );
    assert_contains(
        &back,
        &["queue mail: at most 50 jobs started per 1h by all runners together"],
    );
    let hourly = "50/1h".parse().expect("a rate");
    assert_eq!(limits_of(&mut conn, "mail"), (Some(hourly), None));
    let limited = site.post(
        "/queues/limit",
        &[("csrf", &csrf), ("name", "api"), ("limit", "5")],
    );
    assert_eq!(limited.status, 303, "{}", limited.body);
    assert_eq!(limits_of(&mut conn, "api"), (None, Some(5)));

    // 37 starts in mail's window, and api backing off after a 429: the
    // rows show the use of the rate, the limit, and the time left.
    diesel::sql_query(
        "UPDATE jobqueue_queues SET rate_at = ARRAY[now()], rate_jobs = ARRAY[37] \
         WHERE name = 'mail'",
    )
    .execute(&mut conn)
    .expect("starts in the window");
    diesel::sql_query(
        "UPDATE jobqueue_queues SET backoff_until = now() + interval '1 hour' \
         WHERE name = 'api'",
    )
    .execute(&mut conn)
    .expect("a back-off");
    let overview = site.get("/").body;
    let mail = queue_row(&overview, "mail");
    assert_contains(mail, &["37 of 50/1h", "status active", "Remove rate"]);
    assert!(!mail.contains("Remove limit"), "{mail}");
    let api = queue_row(&overview, "api");
    assert_contains(
        api,
        &[
            "status backoff",
            "m 5",
            "s left",
            "<td class=\"num limit\">5</td>",
            "Remove limit",
        ],
    );
    assert!(api.contains("<td class=\"num rate\">-</td>"), "{api}");

    // Bad input: the library's reason on the page, nothing changed.
    for (path, field, value, says) in [
        ("/queues/rate", "rate", "0/1s", "1 to 1000000"),
        (
            "/queues/rate",
            "rate",
            "5/fortnight",
            "`fortnight` is not a unit",
        ),
        ("/queues/rate", "rate", "", "no rate given"),
        ("/queues/rate", "rate", "5/2d", "1 ms to 1 day"),
        ("/queues/limit", "limit", "0", "give at least 1"),
        ("/queues/limit", "limit", "many", "not a whole number"),
    ] {
        let name = if field == "rate" { "mail" } else { "api" };
        let refused = site.post(path, &[("csrf", &csrf), ("name", name), (field, value)]);
        assert_eq!(refused.status, 400, "{value}: {}", refused.body);
        assert_contains(&refused.body, &[says]);
    }
    assert_eq!(limits_of(&mut conn, "mail"), (Some(hourly), None));
    assert_eq!(limits_of(&mut conn, "api"), (None, Some(5)));
    // A queue nothing names yet takes a limit, as from the command line:
    // the limit waits for its first jobs.
    let unknown = site.post(
        "/queues/rate",
        &[("csrf", &csrf), ("name", "later"), ("rate", "5/1s")],
    );
    assert_eq!(unknown.status, 303, "{}", unknown.body);
    assert!(limits_of(&mut conn, "later").0.is_some());
    jobqueue_core::set_queue_rate_limit(&mut conn, "later", None).expect("remove");

    // Removed: the rows show none, and no button to remove them.
    for (path, name) in [
        ("/queues/remove-rate", "mail"),
        ("/queues/remove-limit", "api"),
    ] {
        let removed = site.post(path, &[("csrf", &csrf), ("name", name)]);
        assert_eq!(removed.status, 303, "{path}: {}", removed.body);
    }
    assert_eq!(limits_of(&mut conn, "mail"), (None, None));
    assert_eq!(limits_of(&mut conn, "api"), (None, None));
    let overview = site.get("/").body;
    assert!(queue_row(&overview, "mail").contains("<td class=\"num rate\">-</td>"));
    assert!(!overview.contains("Remove rate") && !overview.contains("Remove limit"));

    // Read-only: the limits show, no form to change them, and a POST is
    // refused before it changes anything.
    jobqueue_core::set_queue_rate_limit(&mut conn, "mail", Some(hourly)).expect("set");
    let mut config = DashboardConfig::new(&db.url);
    config.read_only = true;
    let read_only = Site::start(config);
    let page = read_only.get("/").body;
    assert_contains(queue_row(&page, "mail"), &["0 of 50/1h"]);
    assert!(
        !page.contains("set-rate") && !page.contains("Remove rate"),
        "{page}"
    );
    for (path, field, value) in [
        ("/queues/rate", "rate", "5/1s"),
        ("/queues/remove-rate", "rate", ""),
        ("/queues/limit", "limit", "3"),
    ] {
        let refused = read_only.post(path, &[("csrf", &csrf), ("name", "mail"), (field, value)]);
        assert_eq!(refused.status, 403, "{path}");
        assert_contains(&refused.body, &["read-only"]);
    }
    assert_eq!(limits_of(&mut conn, "mail"), (Some(hourly), None));
}

/// The key limit of `queue`, as the library lists it.
fn key_limit_of(conn: &mut diesel::PgConnection, queue: &str) -> Option<KeyLimit> {
    let queues = jobqueue_core::list_queues(conn, Default::default()).expect("list");
    queues
        .iter()
        .find(|q| q.queue == queue)
        .unwrap_or_else(|| panic!("no queue {queue}"))
        .key_limit
}

#[test]
fn key_limits_are_shown_and_their_form_sets_and_removes_them() {
    let (db, mut conn) = TestDb::connected();
    put(
        &mut conn,
        1,
        "order.ship",
        JobOptions::new().queue("orders"),
    );
    let site = Site::start(DashboardConfig::new(&db.url));
    let overview = site.get("/").body;
    assert_contains(
        &overview,
        &["id=\"set-keys\"", "<th class=\"num\">keys</th>"],
    );
    assert_contains(
        queue_row(&overview, "orders"),
        &[
            "<td class=\"num keys\">-</td>",
            "<td class=\"num keyed\">-</td>",
        ],
    );
    assert!(
        !overview.contains("Remove key limit"),
        "nothing to remove yet"
    );
    let csrf = jobqueue_tests::csrf_token(&overview);

    // Ordered, then three jobs of one key: the first admitted by its
    // enqueue, two waiting; raised to 2 per key, one more is admitted.
    // Each change says what it did.
    let back = site.acted(
        "/queues/keys",
        &[("csrf", &csrf), ("name", "orders"), ("keys", "ordered")],
    );
    assert_contains(
        &back,
        &["queue orders: one job of a key at a time, in enqueue order, by all runners together"],
    );
    assert_eq!(key_limit_of(&mut conn, "orders"), Some(KeyLimit::ordered()));
    put(
        &mut conn,
        3,
        "order.ship",
        JobOptions::new()
            .queue("orders")
            .concurrency_key("customer:42"),
    );
    let overview = site.get("/").body;
    assert_contains(
        queue_row(&overview, "orders"),
        &["<td class=\"num keys\">ordered</td>", "1 held, 2 waiting"],
    );
    let back = site.acted(
        "/queues/keys",
        &[("csrf", &csrf), ("name", "orders"), ("keys", "2 per key")],
    );
    assert_contains(
        &back,
        &["queue orders: at most 2 jobs of one key at once by all runners together"],
    );
    let two = KeyLimit::per_key(2).expect("a limit");
    assert_eq!(key_limit_of(&mut conn, "orders"), Some(two));
    assert_contains(
        queue_row(&back, "orders"),
        &[
            "<td class=\"num keys\">2 per key</td>",
            "1 held, 1 waiting",
            "Remove key limit",
        ],
    );

    // Bad input: the library's reason on the page; an unknown queue lists
    // the known ones; a form without its CSRF token is refused. Nothing
    // changed.
    for (value, says) in [
        ("0", "0 jobs per key is not a limit: give 1 to 10000"),
        ("-1", "-1 jobs per key is not a limit: give 1 to 10000"),
        ("x", "`x` is not a whole number of jobs per key"),
        ("", "no limit given"),
    ] {
        let refused = site.post(
            "/queues/keys",
            &[("csrf", &csrf), ("name", "orders"), ("keys", value)],
        );
        assert_eq!(refused.status, 400, "{value}: {}", refused.body);
        assert_contains(&refused.body, &[says]);
    }
    // A queue nothing names yet takes a key limit before its first jobs.
    let unknown = site.post(
        "/queues/keys",
        &[("csrf", &csrf), ("name", "later"), ("keys", "5")],
    );
    assert_eq!(unknown.status, 303, "{}", unknown.body);
    let later = jobqueue_core::list_queues(&mut conn, Default::default()).expect("list");
    assert!(
        later
            .iter()
            .any(|q| q.queue == "later" && q.key_limit.is_some())
    );
    jobqueue_core::set_queue_key_limit(&mut conn, "later", None).expect("remove");
    let forged = site.post("/queues/remove-keys", &[("name", "orders")]);
    assert_eq!(forged.status, 403, "{}", forged.body);
    assert_eq!(key_limit_of(&mut conn, "orders"), Some(two));

    // Removed: the waiting job is admitted, the row shows no limit and no
    // button to remove it.
    let back = site.acted(
        "/queues/remove-keys",
        &[("csrf", &csrf), ("name", "orders")],
    );
    assert_contains(&back, &["queue orders: no key limit"]);
    assert_eq!(key_limit_of(&mut conn, "orders"), None);
    assert_eq!(count_where(&mut conn, "status = 'waiting'"), 0);
    assert_contains(
        queue_row(&back, "orders"),
        &[
            "<td class=\"num keys\">-</td>",
            "<td class=\"num keyed\">-</td>",
        ],
    );
    assert!(!back.contains("Remove key limit"), "{back}");

    // Read-only: the limit shows, no form to change it, and a POST is
    // refused before it changes anything.
    jobqueue_core::set_queue_key_limit(&mut conn, "orders", Some(two)).expect("set");
    let mut config = DashboardConfig::new(&db.url);
    config.read_only = true;
    let read_only = Site::start(config);
    let page = read_only.get("/").body;
    assert_contains(queue_row(&page, "orders"), &["2 per key"]);
    assert!(
        !page.contains("set-keys") && !page.contains("Remove key limit"),
        "{page}"
    );
    for (path, value) in [("/queues/keys", "5"), ("/queues/remove-keys", "")] {
        let refused = read_only.post(
            path,
            &[("csrf", &csrf), ("name", "orders"), ("keys", value)],
        );
        assert_eq!(refused.status, 403, "{path}");
        assert_contains(&refused.body, &["read-only"]);
    }
    assert_eq!(key_limit_of(&mut conn, "orders"), Some(two));
}

#[test]
fn declared_settings_changed_at_run_time_are_noted_in_the_queues_row() {
    let (db, mut conn) = TestDb::connected();
    put(&mut conn, 1, "mail.send", JobOptions::new().queue("mail"));
    let ledger = jobqueue_core::QueueConfig::new("ledger")
        .limit(jobqueue_core::GlobalLimit::new(3).expect("a limit"))
        .paused(true);
    jobqueue_core::declare_queue(&mut conn, &ledger).expect("declare");
    let site = Site::start(DashboardConfig::new(&db.url));
    let overview = site.get("/").body;
    assert!(!overview.contains("class=\"override\""), "{overview}");
    assert!(!overview.contains("overrides-note"), "{overview}");

    // An operator raises the limit and resumes the queue: a note each, in
    // ledger's row alone, explained under the table.
    jobqueue_core::set_queue_limit(
        &mut conn,
        "ledger",
        Some(jobqueue_core::GlobalLimit::new(5).expect("a limit")),
    )
    .expect("limit");
    jobqueue_core::resume_queue(&mut conn, "ledger").expect("resume");
    let mut config = DashboardConfig::new(&db.url);
    config.read_only = true;
    for page in [site.get("/").body, Site::start(config).get("/").body] {
        assert_contains(
            queue_row(&page, "ledger"),
            &[
                ">limit 5 (code declares 3)</li>",
                ">working (code declares paused)</li>",
                "title=\"limit 5, set at run time (by an operator): it stands until the code \
                 declares another value; the code declares limit 3.\"",
            ],
        );
        assert!(
            !queue_row(&page, "mail").contains("override"),
            "{}",
            queue_row(&page, "mail")
        );
        assert_contains(
            &page,
            &[
                "id=\"overrides-note\"",
                "stands until the code declares another value",
            ],
        );
    }
}

#[test]
fn forged_read_only_and_tokenless_requests_are_refused() {
    let (db, mut conn) = TestDb::connected();
    let ids = put(&mut conn, 1, "mail.send", JobOptions::new().queue("mail"));
    fail_for_good(&mut conn, "true");

    // No CSRF token, or a wrong one: refused, nothing changed.
    let site = Site::start(DashboardConfig::new(&db.url));
    for form in [&[][..], &[("csrf", "forged")][..]] {
        let forged = site.post(&format!("/jobs/{}/retry", ids[0]), form);
        assert_eq!(forged.status, 403);
        assert!(forged.body.contains("CSRF"), "{}", forged.body);
    }
    assert_eq!(read_job(&mut conn, ids[0]).status, JobStatus::Failed);
    // Another dashboard's token is not this one's.
    let other = Site::start(DashboardConfig::new(&db.url));
    let theirs = other.csrf(&format!("/jobs/{}", ids[0]));
    assert_eq!(
        site.post(&format!("/jobs/{}/retry", ids[0]), &[("csrf", &theirs)])
            .status,
        403
    );

    // Read-only: no buttons, and a POST with a valid token is refused.
    let mut config = DashboardConfig::new(&db.url);
    config.read_only = true;
    let read_only = Site::start(config);
    let page = read_only.get(&format!("/jobs/{}", ids[0])).body;
    assert!(
        !page.contains("<form class=\"inline\" method=\"post\""),
        "{page}"
    );
    assert!(page.contains("read-only"));
    let refused = read_only.post(&format!("/jobs/{}/retry", ids[0]), &[("csrf", "x")]);
    assert_eq!(refused.status, 403);
    assert!(refused.body.contains("read-only"), "{}", refused.body);
    assert_eq!(read_job(&mut conn, ids[0]).status, JobStatus::Failed);

    // An access token: nothing without it; /login sets its cookie.
    let mut config = DashboardConfig::new(&db.url);
    config.access_token = Some("a-long-enough-secret".into());
    let guarded = Site::start(config);
    assert_eq!(guarded.get("/").status, 401);
    assert_eq!(guarded.get("/login?token=wrong-wrong-wrong").status, 401);
    let login = Site::got(
        guarded
            .agent
            .get(guarded.url("/login?token=a-long-enough-secret"))
            .call()
            .expect("login"),
    );
    assert_eq!(login.status, 303);
    // The cookie it set, or the token as a bearer: let in.
    for (header, value) in [
        ("Cookie", "jobqueue_token=a-long-enough-secret"),
        ("Authorization", "Bearer a-long-enough-secret"),
    ] {
        let response = guarded
            .agent
            .get(guarded.url("/"))
            .header(header, value)
            .call()
            .expect("GET");
        assert_eq!(response.status().as_u16(), 200, "{header}");
    }

    // Off loopback without a token: refused before binding; a short token too.
    let open = Dashboard::new(DashboardConfig::new(&db.url)).expect("dashboard");
    let error = serve(open, "0.0.0.0:0".parse().expect("address")).expect_err("needs a token");
    assert!(matches!(error, DashboardError::NeedsToken(_)), "{error}");
    // A database that does not answer stops the start, saying why.
    let nowhere = Dashboard::new(DashboardConfig::new("postgres://postgres@127.0.0.1:1/none"));
    assert!(
        matches!(&nowhere, Err(DashboardError::Queue(e)) if e.to_string().contains("cannot connect")),
        "{nowhere:?}"
    );
    for (token, says) in [
        ("short", "has 5 characters"),
        ("aaaaaaaaaaaaaaaa", "only 1 different"),
        ("                ", "' '"),
        (" 0123456789abcdef ", "' '"),
        ("0123456789abcdef;x", "';'"),
    ] {
        let mut weak = DashboardConfig::new(&db.url);
        weak.access_token = Some(token.into());
        match Dashboard::new(weak) {
            Err(e @ DashboardError::WeakToken(_)) => {
                assert!(e.to_string().contains(says), "{token:?}: {e}")
            }
            other => panic!("{token:?} accepted: {other:?}"),
        }
    }
}

#[test]
fn text_from_the_database_is_escaped_everywhere() {
    let (db, mut conn) = TestDb::connected();
    let site = Site::start(DashboardConfig::new(&db.url));
    let hostile = "<script>alert(1)</script>";
    let payload = serde_json::json!({ "note": hostile }).to_string();
    let id = NewJob::new(
        "evil.type",
        &payload,
        JobOptions::new().queue("evil").unique_key(hostile),
    )
    .expect("job");
    let id = enqueue_many(&mut conn, &[id]).expect("enqueue").inserted[0];
    {
        use diesel::RunQueryDsl;
        diesel::sql_query(
            "UPDATE jobqueue_jobs SET status = 'failed', finished_at = now(), attempts = 1, \
             last_error = '<img src=x onerror=alert(2)>', \
             errors = jsonb_build_array(jsonb_build_object('attempt', 1, 'at', now(), \
                                        'error', '<b>bold</b>')) WHERE id = $1",
        )
        .bind::<diesel::sql_types::Uuid, _>(id)
        .execute(&mut conn)
        .expect("fail");
    }
    for path in [
        format!("/jobs/{id}"),
        "/jobs".to_owned(),
        "/failed".to_owned(),
        "/".to_owned(),
        format!("/jobs?key={}", "%3Cscript%3E"),
        format!("/jobs/{id}?notice=%3Cscript%3Ealert(3)%3C%2Fscript%3E"),
    ] {
        let page = site.get(&path).body;
        for raw in ["<script>alert", "<img src=x", "<b>bold"] {
            assert!(!page.contains(raw), "{path} shows {raw} unescaped:\n{page}");
        }
    }
    let page = site.get(&format!("/jobs/{id}")).body;
    assert_contains(&page, &["&lt;script&gt;alert(1)&lt;/script&gt;"]);
    assert!(page.contains("&lt;img src=x onerror=alert(2)&gt;"));
    // The pages forbid inline scripts anyway.
    let response = site.agent.get(site.url("/")).call().expect("GET");
    let policy = response
        .headers()
        .get("content-security-policy")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_owned();
    assert!(policy.contains("script-src 'self'"), "{policy}");
}

#[test]
fn a_search_no_index_serves_reads_one_window_at_a_time_and_says_so() {
    use diesel::RunQueryDsl;
    use jobqueue_core::browse::{JobQuery, SEARCH_WINDOW, browse_jobs, count_jobs};
    let (db, mut conn) = TestDb::connected();
    // Five cancelled jobs of queue `rare`, then a window's worth of newer
    // completed jobs of another queue on top of them.
    diesel::sql_query(
        "INSERT INTO jobqueue_jobs (id, job_type, queue, status, finished_at)
         SELECT ('00000000-0000-7000-8000-' || lpad(to_hex(g), 12, '0'))::uuid, 'bulk.job',
                CASE WHEN g <= 5 THEN 'rare' ELSE 'bulk' END,
                CASE WHEN g <= 5 THEN 'cancelled' ELSE 'completed' END, now()
         FROM generate_series(1, $1) AS g",
    )
    .bind::<diesel::sql_types::BigInt, _>(SEARCH_WINDOW + 5 + 10)
    .execute(&mut conn)
    .expect("history");
    let query = JobQuery {
        status: Some(JobStatus::Cancelled),
        queue: Some("rare".into()),
        ..JobQuery::default()
    };
    let first = browse_jobs(&mut conn, &query, 50).expect("first window");
    assert!(
        first.jobs.is_empty(),
        "the latest window holds none of them"
    );
    let older = first.searched_to.expect("where the search stopped");
    let count = count_jobs(&mut conn, &query, 10_000).expect("count");
    assert!(count.windowed && count.n == 0, "{count:?}");
    let second = browse_jobs(
        &mut conn,
        &JobQuery {
            cursor: Some(older),
            ..query.clone()
        },
        50,
    )
    .expect("the next window");
    assert_eq!(second.jobs.len(), 5);
    assert!(second.searched_to.is_none(), "nothing older is left");

    // The page says so, and links the next window.
    let site = Site::start(DashboardConfig::new(&db.url));
    let page = site.get("/jobs?status=cancelled&queue=rare").body;
    assert!(page.contains("among the latest 100000 jobs"), "{page}");
    assert!(page.contains("id=\"older\""), "{page}");
}

#[test]
fn the_job_list_filters_by_tag_and_a_jobs_page_links_its_tags() {
    let (db, mut conn) = TestDb::connected();
    let tagged = NewJob::new(
        "x.y",
        "{}",
        JobOptions::new()
            .tag("tenant:42")
            .tag("vip")
            .meta("by", "<ada>"),
    )
    .expect("a job");
    let other = NewJob::new("x.y", "{}", JobOptions::new().tag("tenant:7")).expect("a job");
    enqueue_many(&mut conn, &[tagged.clone(), other.clone()]).expect("enqueue");
    let site = Site::start(DashboardConfig::new(&db.url));

    let page = site.get("/jobs?tag=tenant%3A42");
    assert_eq!(page.status, 200, "{}", page.body);
    assert!(
        page.body.contains(&tagged.id().to_string()),
        "{}",
        page.body
    );
    assert!(
        !page.body.contains(&other.id().to_string()),
        "{}",
        page.body
    );
    assert!(
        page.body.contains("name=\"tag\" value=\"tenant:42\""),
        "{}",
        page.body
    );

    let job = site.get(&format!("/jobs/{}", tagged.id())).body;
    assert_contains(
        &job,
        &[
            "href=\"/jobs?tag=tenant%3A42\"",
            "href=\"/jobs?tag=vip\"",
            "&lt;ada&gt;",
        ],
    );
    let refused = site.get("/jobs?tag=two%20words");
    assert_eq!(refused.status, 400, "{}", refused.body);
    assert!(refused.body.contains("tags"), "{}", refused.body);
}

#[test]
fn the_command_refuses_an_open_address_without_a_token_before_serving() {
    let db = TestDb::new();
    let worker = env!("CARGO_BIN_EXE_jobqueue-test-worker");
    let (code, _, err) =
        jobqueue_tests::run_cli(worker, &db.url, &["dashboard", "--addr", "0.0.0.0:0"]);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("set an access token"), "{err}");
    let (code, _, err) = jobqueue_tests::run_cli(
        worker,
        &db.url,
        &["dashboard", "--addr", "0.0.0.0:0", "--token", "short"],
    );
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("at least 16"), "{err}");
}

/// `GET path` as a browser on a page of `host` would send it.
fn get_as(host: &str, path: &str) -> String {
    format!("GET {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n")
}

/// A form POST of `form` to `path`, sent to `host`, with `extra` headers.
fn post_as(host: &str, path: &str, extra: &str, form: &str) -> String {
    format!(
        "POST {path} HTTP/1.1\r\nHost: {host}\r\n{extra}Content-Type: \
         application/x-www-form-urlencoded\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{form}",
        form.len()
    )
}

#[test]
fn a_rebound_name_gets_no_page_no_token_and_no_action() {
    use jobqueue_tests::raw_http::exchange;
    let (db, mut conn) = TestDb::connected();
    put(&mut conn, 1, "mail.send", JobOptions::new().queue("mail"));
    let site = Site::start(DashboardConfig::new(&db.url));
    let addr = site.server.addr();
    let port = addr.port();
    let csrf = site.csrf("/");

    // A page of attacker.example whose name now resolves to 127.0.0.1: its
    // requests carry its own name. No page, no CSRF token.
    let foreign = format!("attacker.example:{port}");
    let refused = exchange(addr, &get_as(&foreign, "/"));
    assert_eq!(refused.status, 421, "{}", refused.body);
    assert!(!refused.body.contains(&csrf), "{}", refused.body);
    assert!(!refused.body.contains("name=\"csrf\""), "{}", refused.body);
    for said in ["attacker.example", "localhost", "--allowed-host"] {
        assert!(refused.body.contains(said), "{said}: {}", refused.body);
    }
    for path in ["/static/style.css", "/login", "/jobs"] {
        assert_eq!(
            exchange(addr, &get_as(&foreign, path)).status,
            421,
            "{path}"
        );
    }
    // Its POST, even with a valid CSRF token and its own origin: refused,
    // the queue not paused.
    let origin = format!("Origin: http://{foreign}\r\n");
    let form = format!("csrf={csrf}");
    let action = exchange(
        addr,
        &post_as(&foreign, "/queues/mail/pause", &origin, &form),
    );
    assert_eq!(action.status, 421, "{}", action.body);
    assert!(!queue_paused(&mut conn, "mail"));

    // Sent to the dashboard's own host from a page of another site (by its
    // Origin, or by its Referer when there is no Origin, or from no origin
    // at all): refused, nothing changed.
    let here = format!("127.0.0.1:{port}");
    for extra in [
        format!("Origin: http://attacker.example:{port}\r\n"),
        "Origin: http://127.0.0.1:1\r\n".to_owned(),
        "Origin: null\r\n".to_owned(),
        format!("Referer: http://attacker.example:{port}/page\r\n"),
    ] {
        let action = exchange(addr, &post_as(&here, "/queues/mail/pause", &extra, &form));
        assert_eq!(action.status, 403, "{extra}: {}", action.body);
        assert!(action.body.contains("another site") || action.body.contains("no origin"));
        assert!(!queue_paused(&mut conn, "mail"), "{extra}");
    }

    // The dashboard's own pages act, under each loopback name.
    for host in [here.clone(), format!("localhost:{port}")] {
        let page = exchange(addr, &get_as(&host, "/"));
        assert_eq!(page.status, 200, "{host}");
        assert!(page.body.contains(&csrf));
    }
    let own = format!("Origin: http://{here}\r\nReferer: http://{here}/\r\n");
    let paused = exchange(addr, &post_as(&here, "/queues/mail/pause", &own, &form));
    assert_eq!(paused.status, 303, "{}", paused.body);
    assert!(queue_paused(&mut conn, "mail"));
    // A client that sends neither header (a script) still needs the token.
    let resumed = exchange(addr, &post_as(&here, "/queues/mail/resume", "", &form));
    assert_eq!(resumed.status, 303, "{}", resumed.body);
    assert!(!queue_paused(&mut conn, "mail"));
}

#[test]
fn a_named_host_is_answered_and_a_proxy_origin_may_act() {
    use jobqueue_tests::raw_http::exchange;
    let (db, mut conn) = TestDb::connected();
    put(&mut conn, 1, "mail.send", JobOptions::new().queue("mail"));
    let mut config = DashboardConfig::new(&db.url);
    config.allowed_hosts = vec!["jobs.test".to_owned(), "admin.test:443".to_owned()];
    let site = Site::start(config);
    let addr = site.server.addr();
    let csrf = site.csrf("/");
    let named = format!("jobs.test:{}", addr.port());
    assert_eq!(exchange(addr, &get_as(&named, "/")).status, 200);
    assert_eq!(exchange(addr, &get_as("admin.test:443", "/")).status, 200);
    assert_eq!(exchange(addr, &get_as("admin.test:8443", "/")).status, 421);
    // A proxy on https://admin.test forwarding with the dashboard's own
    // Host: the configured origin may act.
    let here = format!("127.0.0.1:{}", addr.port());
    let form = format!("csrf={csrf}");
    let via_proxy = "Origin: https://admin.test\r\n";
    let paused = exchange(
        addr,
        &post_as(&here, "/queues/mail/pause", via_proxy, &form),
    );
    assert_eq!(paused.status, 303, "{}", paused.body);
    assert!(queue_paused(&mut conn, "mail"));

    // A configured host that is not one: refused at the start, saying why.
    let mut bad = DashboardConfig::new(&db.url);
    bad.allowed_hosts = vec!["*.test".to_owned()];
    let error = Dashboard::new(bad).expect_err("not a host");
    assert!(matches!(error, DashboardError::AllowedHost(_)), "{error}");
    let worker = env!("CARGO_BIN_EXE_jobqueue-test-worker");
    let (code, _, err) = jobqueue_tests::run_cli(
        worker,
        &db.url,
        &["dashboard", "--allowed-host", "jobs.test,bad host"],
    );
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("`bad host` is not a host name"), "{err}");
}

#[test]
fn the_configuration_shows_no_secret_in_debug() {
    let mut config = DashboardConfig::new("postgres://app:db-secret-db-secret@127.0.0.1/app");
    config.access_token = Some("a-long-enough-secret".into());
    config.csrf_secret = Some("replicas-share-this-csrf-secret-0123".into());
    let shown = format!("{config:?} {:#?}", config);
    assert!(!shown.contains("a-long-enough-secret"), "{shown}");
    assert!(!shown.contains("replicas-share"), "{shown}");
    assert!(!shown.contains("db-secret"), "{shown}");
    assert!(shown.contains("<redacted>"), "{shown}");
    let mut request = jobqueue_dashboard::Request::new(
        jobqueue_dashboard::Method::Get,
        "/login?token=a-long-enough-secret",
    );
    request.cookie = Some("jobqueue_token=a-long-enough-secret".into());
    request.authorization = Some("Bearer a-long-enough-secret".into());
    let shown = format!("{request:?}");
    assert!(!shown.contains("a-long-enough-secret"), "{shown}");
}

#[test]
fn names_travel_in_forms_and_paths_are_decoded_once() {
    use diesel::RunQueryDsl;
    use jobqueue_tests::raw_http::exchange;
    let (db, mut conn) = TestDb::connected();
    put(&mut conn, 1, "mail.send", JobOptions::new().queue("mail"));
    // Names the table takes (it checks only lengths) and the library's own
    // `..`: the pages' buttons carry them in the form, never in the path.
    // The library's own `.` and `..`, and names only SQL can write (the
    // table checks lengths alone): the pages' buttons carry them in the
    // form, never in the path, where a browser would resolve them.
    let allowed = [".", ".."];
    let refused = ["x/../../failed/retry?", "a#b", "50%", "q?x=1&y"];
    for name in allowed.iter().chain(&refused) {
        diesel::sql_query("INSERT INTO jobqueue_queues (name) VALUES ($1)")
            .bind::<diesel::sql_types::Text, _>(*name)
            .execute(&mut conn)
            .expect("a queue of a hostile name");
    }
    fail_for_good(&mut conn, "true");
    let site = Site::start(DashboardConfig::new(&db.url));
    let addr = site.server.addr();
    let host = addr.to_string();
    let csrf = site.csrf("/");
    let overview = site.get("/").body;
    assert!(!overview.contains("action=\"/queues/.."), "{overview}");
    let act = |path: &str, name: &str| {
        let form = jobqueue_tests::raw_http::form(&[("csrf", &csrf), ("name", name)]);
        exchange(addr, &post_as(&host, path, "", &form))
    };
    for name in allowed {
        let paused = act("/queues/pause", name);
        assert_eq!(paused.status, 303, "{name}: {}", paused.body);
        assert!(queue_paused(&mut conn, name), "{name}");
        assert_eq!(act("/queues/resume", name).status, 303, "{name}");
        assert!(!queue_paused(&mut conn, name), "{name}");
    }
    for name in refused {
        let answer = act("/queues/pause", name);
        assert_eq!(answer.status, 400, "{name}: {}", answer.body);
        assert!(
            answer.body.contains("invalid queue"),
            "{name}: {}",
            answer.body
        );
        assert!(!queue_paused(&mut conn, name), "{name}");
    }
    assert_eq!(
        count_where(&mut conn, "status = 'failed'"),
        1,
        "nothing retried"
    );
    assert!(!queue_paused(&mut conn, "mail"), "only the named queues");
    // A segment is decoded once: `m%61il` is `mail`, `%252F` is `%2F`.
    let form = format!("csrf={csrf}");
    let decoded = exchange(addr, &post_as(&host, "/queues/m%61il/pause", "", &form));
    assert_eq!(decoded.status, 303, "{}", decoded.body);
    assert!(queue_paused(&mut conn, "mail"));
    assert_eq!(
        exchange(addr, &post_as(&host, "/queues/%FF/pause", "", &form)).status,
        400,
        "not UTF-8 once decoded"
    );
    let unnamed = exchange(addr, &post_as(&host, "/queues/resume", "", &form));
    assert_eq!(unnamed.status, 400, "{}", unnamed.body);
    // A method the dashboard does not serve: 405, saying which it does.
    let delete = exchange(
        addr,
        &format!("DELETE / HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n"),
    );
    assert_eq!(delete.status, 405);
    assert_eq!(
        delete.header("allow"),
        Some("GET, HEAD, POST"),
        "{}",
        delete.head
    );
}

fn queue_paused(conn: &mut diesel::PgConnection, name: &str) -> bool {
    #[derive(diesel::QueryableByName)]
    struct Paused {
        #[diesel(sql_type = diesel::sql_types::Bool)]
        paused: bool,
    }
    use diesel::{OptionalExtension, RunQueryDsl};
    // A queue has a row once paused or limited.
    diesel::sql_query("SELECT paused FROM jobqueue_queues WHERE name = $1")
        .bind::<diesel::sql_types::Text, _>(name)
        .get_result::<Paused>(conn)
        .optional()
        .expect("read the queue")
        .is_some_and(|q| q.paused)
}

#[test]
fn replicas_sharing_a_csrf_secret_accept_each_others_forms() {
    use jobqueue_dashboard::{Method, Request};
    let (db, mut conn) = TestDb::connected();
    put(&mut conn, 1, "mail.send", JobOptions::new().queue("mail"));
    let secret = "replicas-share-this-csrf-secret-0123";
    let replica = || {
        let mut config = DashboardConfig::new(&db.url);
        config.csrf_secret = Some(secret.into());
        Dashboard::new(config).expect("dashboard")
    };
    let (one, two) = (replica(), replica());
    let host = Some("127.0.0.1".to_owned());
    let mut front = Request::new(Method::Get, "/");
    front.host = host.clone();
    let page = one.handle(&front);
    let page = String::from_utf8_lossy(&page.body).into_owned();
    assert!(!page.contains(secret), "pages show a hash, not the secret");
    let csrf = jobqueue_tests::csrf_token(&page);
    let form = format!("csrf={csrf}&name=mail");
    let mut pause = Request::new(Method::Post, "/queues/pause");
    pause.host = host.clone();
    pause.body = form.clone().into_bytes();
    let acted = two.handle(&pause);
    assert_eq!(
        acted.status,
        303,
        "{}",
        String::from_utf8_lossy(&acted.body)
    );
    assert!(queue_paused(&mut conn, "mail"));
    // A dashboard of its own secret refuses the other's form.
    let other = Dashboard::new(DashboardConfig::new(&db.url)).expect("dashboard");
    let mut resume = Request::new(Method::Post, "/queues/resume");
    resume.host = host;
    resume.body = form.into_bytes();
    let refused = other.handle(&resume);
    assert_eq!(refused.status, 403);
    let mut weak = DashboardConfig::new(&db.url);
    weak.csrf_secret = Some("short-secret-0123456789".into());
    assert!(matches!(
        Dashboard::new(weak),
        Err(DashboardError::WeakCsrfSecret(_))
    ));
}

#[test]
fn a_workflow_page_draws_its_steps_and_edges_and_lists_their_states() {
    let (db, mut conn) = TestDb::connected();
    let site = Site::start(DashboardConfig::new(&db.url));
    let job = |n: u32| {
        NewJob::new("flow.step", &format!("{{\"n\":{n}}}"), JobOptions::new()).expect("job")
    };
    let mut flow = jobqueue_core::Workflow::new("<b>publish</b>").expect("workflow");
    let first = flow.add_job("transcode", job(1)).expect("step");
    let fan: Vec<_> = (0..3)
        .map(|i| flow.add_job(format!("thumb-{i}"), job(i)).expect("step"))
        .collect();
    let last = flow.add_job("<script>x</script>", job(9)).expect("step");
    for &f in &fan {
        flow.after(f, [first]).expect("edge");
    }
    flow.after(last, fan).expect("edge");
    let enqueued = flow.enqueue(&mut conn).expect("enqueue");

    let page = site.get(&format!("/workflows/{}", enqueued.id));
    assert_eq!(page.status, 200, "{}", page.body);
    let body = &page.body;
    assert_contains(
        body,
        &[
            "id=\"workflow-graph\"",
            "5: 0 completed, 0 failed, 0 cancelled, 5 not ended",
            "&lt;b&gt;publish&lt;/b&gt;",
            "&lt;script&gt;x&lt;/script&gt;",
        ],
    );
    assert!(!body.contains("<script>x"), "a step's name unescaped");
    // Five boxes and six edges, each edge from a parent's box to its child's.
    assert_eq!(body.matches("<g class=\"step\"").count(), 5, "{body}");
    assert_eq!(body.matches("<line class=\"edge").count(), 6, "{body}");
    // The page is found by a step's id too, and a job's page links to its
    // workflow.
    let by_step = site.get(&format!("/workflows/{}", enqueued.steps[0].1));
    assert_eq!(by_step.status, 200);
    let job_page = site.get(&format!("/jobs/{}", enqueued.steps[4].1)).body;
    assert_contains(
        &job_page,
        &[&format!("href=\"/workflows/{}\"", enqueued.id), "blocked"],
    );
    let missing = site.get(&format!("/workflows/{}", jobqueue_core::JobId::new()));
    assert_eq!(missing.status, 404);
    assert_contains(&missing.body, &["no workflow with id"]);

    // The list: newest first, linked, its steps counted by state; a
    // finished one is left out of the unfinished ones.
    let mut done = jobqueue_core::Workflow::new("done").expect("workflow");
    let only = done.add_job("only", job(0)).expect("step");
    let done = done.enqueue(&mut conn).expect("enqueue");
    exec(
        &mut conn,
        &format!(
            "UPDATE jobqueue_workflow_steps SET state = 'completed', ended_at = now()
             WHERE job_id = '{}'",
            only.id()
        ),
    );
    let list = site.get("/workflows");
    assert_eq!(list.status, 200, "{}", list.body);
    let body = &list.body;
    let (newest, older) = (
        body.find(&format!("data-workflow=\"{}\"", done.id)),
        body.find(&format!("data-workflow=\"{}\"", enqueued.id)),
    );
    assert!(newest.is_some() && newest < older, "newest first:\n{body}");
    assert_contains(
        body,
        &[
            &format!("href=\"/workflows/{}\"", enqueued.id),
            "&lt;b&gt;publish&lt;/b&gt;",
            "running",
            "completed",
        ],
    );
    let unfinished = site.get("/workflows?unfinished=1").body;
    assert!(
        unfinished.contains(&enqueued.id.to_string()),
        "{unfinished}"
    );
    assert!(!unfinished.contains(&done.id.to_string()), "{unfinished}");
}
