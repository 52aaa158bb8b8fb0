//! The dashboard in a real headless Chromium against a real database: every
//! page loads and shows what the database holds; the job list filters and
//! pages through its form and its "Next page" link; a job opened from a
//! list shows its row; every action is pressed as a person would (retry
//! from a job and from the dead letter, retry every matching failed job
//! after its count, pause and resume a queue and a schedule, set and remove
//! a queue's rate limit and its key limit, run a schedule now, cancel,
//! delete), and the database is checked after each. Hostile
//! text in every field the pages show reads back verbatim and runs nothing;
//! a form without its CSRF token, or any form in a read-only dashboard, is
//! refused and changes nothing. A setting the code declares for a queue
//! that was changed at run time is noted in the queue's row, and only then.
//!
//! Screenshots of every page and after every action land in
//! `target/screenshots/<test>/` for a person to look at.

use std::collections::BTreeMap;

use diesel::prelude::*;
use diesel::sql_types::{Text, Uuid};
use jobqueue_core::{
    JobId, JobOptions, JobRow, JobStatus, NewJob, Periodic, QueueConfig, enqueue_many,
};
use jobqueue_dashboard::{Dashboard, DashboardConfig, DashboardServer, serve};
use jobqueue_tests::browser::{Browser, Tab};
use jobqueue_tests::raw_http::percent_encode as encode;
use jobqueue_tests::{TestDb, count_where, read_job};

/// The schedule every test declares.
const SCHEDULE: &str = "nightly-digest";

/// A dashboard on a port of its own.
struct Site {
    server: DashboardServer,
}

impl Site {
    fn start(config: DashboardConfig) -> Self {
        let dashboard = Dashboard::new(config).expect("dashboard");
        let server = serve(dashboard, "127.0.0.1:0".parse().expect("address")).expect("serve");
        Site { server }
    }

    fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.server.addr())
    }
}

/// Enqueues `n` jobs of `job_type` on `queue` (payload `{"n": i}`).
fn put(conn: &mut PgConnection, n: usize, job_type: &str, queue: &str) -> Vec<JobId> {
    let jobs: Vec<NewJob> = (0..n)
        .map(|i| {
            NewJob::new(
                job_type,
                &format!("{{\"n\":{i}}}"),
                JobOptions::new().queue(queue),
            )
            .expect("job")
        })
        .collect();
    enqueue_many(conn, &jobs).expect("enqueue").inserted
}

/// Makes `ids` failed for good, with one failed attempt in their history.
fn fail(conn: &mut PgConnection, ids: &[JobId]) {
    for &id in ids {
        diesel::sql_query(
            "UPDATE jobqueue_jobs SET status = 'failed', finished_at = now(), attempts = 1, \
             last_error = 'boom', lease_expires_at = NULL, \
             errors = jsonb_build_array(jsonb_build_object('attempt', 1, 'at', now(), \
                                                           'error', 'boom')) \
             WHERE id = $1",
        )
        .bind::<Uuid, _>(id)
        .execute(conn)
        .expect("fail the job");
    }
}

/// Makes job `id` completed.
fn complete(conn: &mut PgConnection, id: JobId) {
    diesel::sql_query(
        "UPDATE jobqueue_jobs SET status = 'completed', finished_at = now(), attempts = 1 \
         WHERE id = $1",
    )
    .bind::<Uuid, _>(id)
    .execute(conn)
    .expect("complete the job");
}

/// The ids of the jobs matching a SQL condition, newest first (as the job
/// list orders them), as the page shows them.
fn ids_where(conn: &mut PgConnection, condition: &str) -> Vec<String> {
    #[derive(QueryableByName)]
    struct IdRow {
        #[diesel(sql_type = Uuid)]
        id: JobId,
    }
    diesel::sql_query(format!(
        "SELECT id FROM jobqueue_jobs WHERE {condition} ORDER BY id DESC"
    ))
    .load::<IdRow>(conn)
    .expect("job ids")
    .into_iter()
    .map(|row| row.id.to_string())
    .collect()
}

/// Declares [`SCHEDULE`]: a nightly `test.noop` job with payload `{"n": 7}`.
fn declare_schedule(conn: &mut PgConnection) {
    let nightly = Periodic::new(SCHEDULE, "0 3 * * *", &jobqueue_tests::jobs::Noop { n: 7 });
    jobqueue_core::engine::declare_schedules(conn, &[nightly]).expect("declare the schedule");
}

fn queue_paused(conn: &mut PgConnection, queue: &str) -> bool {
    let queues =
        jobqueue_core::list_queues(conn, jobqueue_core::Counting::Live).expect("list queues");
    is_paused(queues.iter().map(|q| (q.queue.as_str(), q.paused)), queue)
}

fn schedule_paused(conn: &mut PgConnection, name: &str) -> bool {
    let schedules = jobqueue_core::list_schedules(conn).expect("list schedules");
    is_paused(schedules.iter().map(|s| (s.name.as_str(), s.paused)), name)
}

/// Whether `name` is paused, of the `(name, paused)` pairs listed; panics
/// if it is not listed.
fn is_paused<'a>(listed: impl IntoIterator<Item = (&'a str, bool)>, name: &str) -> bool {
    listed
        .into_iter()
        .find(|(listed, _)| *listed == name)
        .unwrap_or_else(|| panic!("no {name} listed"))
        .1
}

/// An instant as the pages show it.
fn when(at: chrono::DateTime<chrono::Utc>) -> String {
    at.format("%Y-%m-%d %H:%M:%S").to_string()
}

/// Loads `url` and waits until its heading is `title` (so that nothing
/// read next comes from the page before).
fn open(tab: &Tab, url: &str, title: &str) {
    tab.goto(url);
    tab.wait_for_text("main h1", title);
}

/// The HTTP status of the page the tab shows (the last response of its
/// navigation: a redirected POST gives the page's status).
fn http_status(tab: &Tab) -> u64 {
    tab.eval("performance.getEntriesByType('navigation')[0].responseStatus")
        .as_u64()
        .expect("a navigation entry with a status")
}

/// The notice an action left on the page.
fn notice(tab: &Tab) -> String {
    tab.text("p.notice")
}

/// The `data-id`s of the rows of the job table, in order.
fn row_ids(tab: &Tab) -> Vec<String> {
    serde_json::from_value(
        tab.eval("Array.from(document.querySelectorAll('#jobs tbody tr'), tr => tr.dataset.id)"),
    )
    .expect("a list of ids")
}

/// The texts of the cells of every row matching `rows`, row by row.
fn cells(tab: &Tab, rows: &str) -> Vec<Vec<String>> {
    serde_json::from_value(tab.eval(&format!(
        "Array.from(document.querySelectorAll({}), tr => Array.from(tr.cells, td => td.textContent))",
        serde_json::to_string(rows).expect("json")
    )))
    .expect("rows of cells")
}

/// Asserts that the post just sent was refused (the Refused page, status
/// 403) with a notice that says `why`.
fn assert_refused(tab: &Tab, why: &str) {
    tab.wait_for_text("main h1", "Refused");
    assert_eq!(http_status(tab), 403, "{}", tab.url());
    let notice = tab.text("p.notice.error");
    assert!(notice.contains(why), "{notice}");
}

/// The texts of the cells at `columns` of the one table row `rows`
/// selects; panics unless it selects exactly one.
fn only_row(tab: &Tab, rows: &str, columns: &[usize]) -> Vec<String> {
    let found = cells(tab, rows);
    assert_eq!(found.len(), 1, "one row of {rows}: {found:?}");
    columns
        .iter()
        .map(|&column| found[0][column].clone())
        .collect()
}

/// The labels of the action buttons (POST forms) on the page.
fn buttons(tab: &Tab) -> Vec<String> {
    tab.texts("form[method=post] button")
}

/// The overview reloads itself every 5 s (`data-refresh`): stops its timer
/// (every timer of the page) so that no reload swallows a click or swaps
/// the document between two reads. Called right after an overview loads;
/// the reload itself is tested in the first test.
fn stop_refresh(tab: &Tab) {
    tab.eval(
        "(() => { const last = setTimeout(() => {}, 0); \
         for (let i = 0; i <= last; i++) { clearInterval(i); clearTimeout(i); } return last; })()",
    );
}

/// The job page's facts, by label.
fn facts(tab: &Tab) -> BTreeMap<String, String> {
    serde_json::from_value(tab.eval(
        "Object.fromEntries(Array.from(document.querySelectorAll('#facts dt'), \
         dt => [dt.textContent, dt.nextElementSibling.textContent]))",
    ))
    .expect("the facts")
}

/// Asserts that the job page the tab shows tells what `job`'s row holds.
fn assert_shows_job(tab: &Tab, job: &JobRow) {
    assert_shows_job_with(tab, job, None);
}

/// [`assert_shows_job`], for a job whose result is kept for its enqueuer.
fn assert_shows_job_with(tab: &Tab, job: &JobRow, result: Option<&serde_json::Value>) {
    tab.wait_for_text("main h1", &format!("Job {}", job.id));
    let facts = facts(tab);
    let expected: BTreeMap<String, String> = [
        ("id", job.id.to_string()),
        ("type", job.job_type.clone()),
        ("queue", job.queue.clone()),
        ("status", job.status.as_str().to_owned()),
        ("priority", job.priority.to_string()),
        (
            "attempts",
            format!("{} of {}", job.attempts, job.max_attempts),
        ),
        ("run at", when(job.run_at)),
        ("progress", format!("{} %", job.progress)),
        (
            "worker",
            job.worker_id.clone().unwrap_or_else(|| "-".into()),
        ),
        ("lease until", job.lease_expires_at.map_or("-".into(), when)),
        ("heartbeat", job.heartbeat_at.map_or("-".into(), when)),
        (
            "cancel requested",
            if job.cancel_requested { "yes" } else { "no" }.into(),
        ),
        (
            "unique key",
            job.unique_key.clone().unwrap_or_else(|| "-".into()),
        ),
        (
            "tags",
            job.tags
                .as_ref()
                .map_or_else(|| "-".into(), |tags| tags.join(" ")),
        ),
        (
            "traceparent",
            job.traceparent.clone().unwrap_or_else(|| "-".into()),
        ),
        (
            "last error",
            job.last_error.clone().unwrap_or_else(|| "-".into()),
        ),
    ]
    .into_iter()
    .chain(job.metadata.as_ref().map(|m| ("metadata", m.to_string())))
    .chain(
        job.step_outputs
            .as_ref()
            .map(|steps| ("durable steps", steps.to_string())),
    )
    .chain(
        job.step_cursor
            .as_ref()
            .map(|cursor| ("durable cursor", cursor.to_string())),
    )
    .chain(result.map(|result| ("result", result.to_string())))
    .map(|(k, v)| (k.to_owned(), v))
    .collect();
    assert_eq!(facts, expected, "the facts of job {}", job.id);
    assert_eq!(
        tab.text("#payload"),
        serde_json::to_string_pretty(&job.payload).expect("json")
    );
    let history: Vec<String> = job
        .errors
        .as_array()
        .map(|entries| {
            entries
                .iter()
                .map(|e| e["error"].as_str().unwrap_or_default().to_owned())
                .collect()
        })
        .unwrap_or_default();
    assert_eq!(tab.texts("#errors td.error pre"), history);
    // The buttons its status allows.
    let mut allowed = Vec::new();
    if matches!(job.status, JobStatus::Failed | JobStatus::Cancelled) {
        allowed.push("Retry");
    }
    if job.status.is_finished() {
        allowed.push("Delete");
    } else {
        allowed.push("Cancel");
    }
    assert_eq!(buttons(tab), allowed);
}

/// The notes under each queue's name on the overview (the settings the
/// code declares that were changed at run time), by queue.
fn override_notes(tab: &Tab) -> BTreeMap<String, Vec<String>> {
    serde_json::from_value(tab.eval(
        "Object.fromEntries(Array.from(document.querySelectorAll('#queues tr[data-queue]'), \
         tr => [tr.dataset.queue, Array.from(tr.querySelectorAll('li.override'), li => li.textContent)]))",
    ))
    .expect("the notes by queue")
}

/// The overview's queue rows (name and its override notes, state, counts,
/// limits, buttons) against `list_queues`.
fn assert_overview_matches(tab: &Tab, conn: &mut PgConnection) {
    let queues =
        jobqueue_core::list_queues(conn, jobqueue_core::Counting::Live).expect("list queues");
    let shown = cells(tab, "#queues tbody tr");
    let names: Vec<String> = serde_json::from_value(tab.eval(
        "Array.from(document.querySelectorAll('#queues tr[data-queue]'), tr => tr.dataset.queue)",
    ))
    .expect("queue names");
    assert_eq!(
        names,
        queues.iter().map(|q| q.queue.clone()).collect::<Vec<_>>()
    );
    let notes = override_notes(tab);
    for (row, q) in shown.iter().zip(&queues) {
        let state = if q.paused { "paused" } else { "active" };
        let expected_notes: Vec<String> = q
            .overrides()
            .into_iter()
            .map(|o| {
                let now = if o.setting == "paused" {
                    o.now
                } else {
                    format!("{} {}", o.setting, o.now)
                };
                format!("{now} (code declares {})", o.declared)
            })
            .collect();
        assert_eq!(notes[&q.queue], expected_notes, "queue {}", q.queue);
        assert_eq!(
            row[..7],
            [
                format!("{}{}", q.queue, expected_notes.concat()),
                state.to_owned(),
                q.count(JobStatus::Pending).to_string(),
                q.count(JobStatus::Scheduled).to_string(),
                q.count(JobStatus::Unhandled).to_string(),
                q.held().to_string(),
                q.count(JobStatus::Failed).to_string()
            ],
            "queue {}",
            q.queue
        );
        let limit = q.global_limit.map_or("-".into(), |n| n.to_string());
        let rate = q
            .rate_limit
            .map_or("-".into(), |r| format!("{} of {r}", q.rate_used));
        let keys = q.key_limit.map_or("-".into(), |k| k.to_string());
        let waiting = q.count(JobStatus::Waiting);
        let keyed = if q.key_limit.is_none() && waiting == 0 {
            "-".into()
        } else {
            format!("{} held, {waiting} waiting", q.keys_held)
        };
        assert_eq!(row[8..12], [limit, rate, keys, keyed], "queue {}", q.queue);
        let mut actions = if q.paused { "Resume" } else { "Pause" }.to_owned();
        if q.global_limit.is_some() {
            actions.push_str(" Remove limit");
        }
        if q.rate_limit.is_some() {
            actions.push_str(" Remove rate");
        }
        if q.key_limit.is_some() {
            actions.push_str(" Remove key limit");
        }
        assert_eq!(row[12], actions, "queue {}", q.queue);
    }
}

#[test]
fn every_page_shows_the_database_and_the_job_list_filters_pages_and_opens_jobs() {
    let (db, mut conn) = TestDb::connected();
    let mail = put(&mut conn, 120, "mail.send", "mail");
    put(&mut conn, 3, "media.encode", "media");
    fail(&mut conn, &mail[..5]);
    declare_schedule(&mut conn);
    let site = Site::start(DashboardConfig::new(&db.url));
    let browser = Browser::start();
    let tab = browser.new_tab();

    // The overview: every queue with its counts, as list_queues has them.
    open(&tab, &site.url("/"), "Overview");
    assert_overview_matches(&tab, &mut conn);
    tab.screenshot("overview");
    // It reloads itself: a queue that comes into being shows without a click.
    put(&mut conn, 1, "late.job", "late");
    tab.wait_for("#queues tr[data-queue=\"late\"]");
    stop_refresh(&tab);
    assert_overview_matches(&tab, &mut conn);

    // Every job, newest first, 50 a page.
    open(&tab, &site.url("/jobs"), "Jobs");
    let all = ids_where(&mut conn, "true");
    assert_eq!(all.len(), 124);
    assert_eq!(tab.text("#count"), "124 jobs match.");
    assert_eq!(row_ids(&tab), all[..50]);
    assert!(tab.exists("#next"));
    tab.screenshot("jobs");

    // The filter form: queue mail, status pending; every page of it, by
    // its "Next page" link, is what the database holds.
    tab.fill("form.filters input[name=queue]", "mail");
    tab.fill("form.filters select[name=status]", "pending");
    tab.submit("form.filters");
    tab.wait_for_text("#count", "jobs match");
    let url = tab.url();
    assert!(
        url.contains("status=pending") && url.contains("queue=mail"),
        "{url}"
    );
    assert_eq!(tab.value("form.filters input[name=queue]"), "mail");
    assert_eq!(tab.value("form.filters select[name=status]"), "pending");
    let pending_mail = ids_where(&mut conn, "queue = 'mail' AND status = 'pending'");
    assert_eq!(pending_mail.len(), 115);
    assert_eq!(
        count_where(&mut conn, "queue = 'mail' AND status = 'pending'"),
        115
    );
    assert_eq!(tab.text("#count"), "115 jobs match.");
    tab.screenshot("jobs-filtered");
    let mut seen = Vec::new();
    let mut pages = 0;
    loop {
        pages += 1;
        let ids = row_ids(&tab);
        assert_eq!(ids, pending_mail[seen.len()..(seen.len() + 50).min(115)]);
        for row in cells(&tab, "#jobs tbody tr") {
            assert_eq!((row[2].as_str(), row[3].as_str()), ("mail", "pending"));
        }
        seen.extend(ids);
        if !tab.exists("#next") {
            break;
        }
        tab.follow("#next");
        tab.wait_for_text("#count", "115 jobs match.");
    }
    assert_eq!(pages, 3, "115 jobs: pages of 50, 50 and 15");
    assert_eq!(seen, pending_mail);
    tab.screenshot("jobs-filtered-last-page");

    // Another filter: a type (the status back to any).
    tab.fill("form.filters input[name=queue]", "");
    tab.fill("form.filters select[name=status]", "");
    tab.fill("form.filters input[name=type]", "media.encode");
    tab.submit("form.filters");
    tab.wait_for_text("#count", "3 jobs match.");
    assert_eq!(
        row_ids(&tab),
        ids_where(&mut conn, "job_type = 'media.encode'")
    );
    assert!(!tab.exists("#next"));

    // A job opened from the list shows its row.
    let first = row_ids(&tab)[0].clone();
    tab.follow("#jobs tbody tr:first-child a");
    assert!(
        tab.url().ends_with(&format!("/jobs/{first}")),
        "{}",
        tab.url()
    );
    let job = read_job(&mut conn, first.parse().expect("an id"));
    assert_shows_job(&tab, &job);
    tab.screenshot("job");

    // A tag: two mail jobs carry `vip` and `eu`, metadata and a durable
    // step's output; the tag filter lists them alone, a job's page shows
    // all three, and its tag links to the tag's list.
    jobqueue_tests::exec(
        &mut conn,
        &format!(
            "UPDATE jobqueue_jobs SET tags = ARRAY['vip', 'eu'], metadata = '{{\"by\": \"ada\"}}',
                 step_outputs = '[{{\"name\": \"reserve\", \"output\": 1}}]',
                 step_cursor = '{{\"offset\": 200}}'
             WHERE id IN ('{}', '{}')",
            mail[10], mail[20]
        ),
    );
    let vip = ids_where(&mut conn, "tags @> ARRAY['vip']");
    open(&tab, &site.url("/jobs"), "Jobs");
    tab.fill("form.filters input[name=tag]", "vip");
    tab.submit("form.filters");
    tab.wait_for_text("#count", "2 jobs match.");
    assert_eq!(row_ids(&tab), vip);
    // The first also has a result kept for its enqueuer.
    jobqueue_tests::exec(
        &mut conn,
        &format!(
            "INSERT INTO jobqueue_results (job_id, job_type, result)
             VALUES ('{}', 'mail.send', '{{\"sent\": true}}')",
            vip[0]
        ),
    );
    tab.follow("#jobs tbody tr:first-child a");
    assert_shows_job_with(
        &tab,
        &read_job(&mut conn, vip[0].parse().expect("an id")),
        Some(&serde_json::json!({ "sent": true })),
    );
    tab.follow("#tags a:last-child");
    tab.wait_for_text("#count", "2 jobs match");
    assert_eq!(tab.value("form.filters input[name=tag]"), "eu");
    assert_eq!(row_ids(&tab), vip);

    // The dead letter: the failed jobs, their errors, the retry-all link.
    open(&tab, &site.url("/failed"), "Failed jobs");
    assert_eq!(
        tab.text("#count"),
        "5 failed jobs match. Retry every one of them…"
    );
    let mut shown = row_ids(&tab);
    shown.sort();
    let mut failed = ids_where(&mut conn, "status = 'failed'");
    failed.sort();
    assert_eq!(shown, failed);
    for (row, id) in cells(&tab, "#jobs tbody tr").iter().zip(row_ids(&tab)) {
        let job = read_job(&mut conn, id.parse().expect("an id"));
        assert_eq!(
            row[1..7],
            [
                job.job_type,
                job.queue,
                format!("{}/{}", job.attempts, job.max_attempts),
                when(job.finished_at.expect("finished")),
                "boom".to_owned(),
                "Retry".to_owned(),
            ]
        );
    }
    tab.screenshot("failed");
    // A failed job opened from it shows its error and its history.
    let first = row_ids(&tab)[0].clone();
    tab.follow("#jobs tbody tr:first-child a");
    let job = read_job(&mut conn, first.parse().expect("an id"));
    assert_eq!(job.status, JobStatus::Failed);
    assert_shows_job(&tab, &job);
    tab.screenshot("job-failed");

    // The schedules, as list_schedules has them.
    open(&tab, &site.url("/schedules"), "Schedules");
    let schedule = jobqueue_core::list_schedules(&mut conn).expect("list schedules");
    assert_eq!(schedule.len(), 1);
    let s = &schedule[0];
    assert_eq!(
        cells(&tab, "#schedules tr[data-schedule]"),
        [vec![
            SCHEDULE.to_owned(),
            "0 3 * * *".to_owned(),
            "UTC".to_owned(),
            "test.noop".to_owned(),
            s.queue.clone(),
            when(s.last_slot),
            when(s.next_slot().expect("a next slot")),
            "active".to_owned(),
            "Pause Run now".to_owned(),
        ]]
    );
    tab.screenshot("schedules");
    assert!(tab.dialogs().is_empty(), "dialogs: {:?}", tab.dialogs());
}

/// Queue mail as `list_queues` lists it.
fn mail_queue(conn: &mut PgConnection) -> jobqueue_core::QueueInfo {
    jobqueue_core::list_queues(conn, jobqueue_core::Counting::Live)
        .expect("list queues")
        .into_iter()
        .find(|q| q.queue == "mail")
        .expect("queue mail")
}

/// Submits the limit form `form` (its id) under the overview's table for
/// queue mail, with `value` in its field `field`.
fn submit_mail_limit(tab: &Tab, form: &str, field: &str, value: &str) {
    tab.fill(&format!("#{form} select[name=name]"), "mail");
    tab.fill(&format!("#{form} input[name={field}]"), value);
    tab.submit(&format!("#{form}"));
}

/// Asserts that a form was refused as not understood (400), saying `says`.
fn assert_not_understood(tab: &Tab, says: &str) {
    tab.wait_for_text("main h1", "Not understood");
    assert_eq!(http_status(tab), 400);
    let said = tab.text("p.notice.error");
    assert!(said.contains(says), "{said}");
}

/// Presses the button of queue mail's overview row that posts to `action`.
fn press_mail_row_button(tab: &Tab, site: &Site, action: &str) {
    open(tab, &site.url("/"), "Overview");
    stop_refresh(tab);
    tab.follow(&format!(
        "#queues tr[data-queue=\"mail\"] form[action$=\"/{action}\"] button"
    ));
    stop_refresh(tab);
}

#[test]
fn every_action_pressed_in_the_browser_changes_the_database() {
    let (db, mut conn) = TestDb::connected();
    let mail = put(&mut conn, 6, "mail.send", "mail");
    let media = put(&mut conn, 2, "media.encode", "media");
    fail(&mut conn, &mail[..4]);
    fail(&mut conn, &media);
    let (pending, finished) = (mail[4], mail[5]);
    complete(&mut conn, finished);
    declare_schedule(&mut conn);
    let site = Site::start(DashboardConfig::new(&db.url));
    let browser = Browser::start();
    let tab = browser.new_tab();

    // Retry a failed job from its page.
    let id = mail[0];
    open(
        &tab,
        &site.url(&format!("/jobs/{id}")),
        &format!("Job {id}"),
    );
    assert_eq!(tab.text("#job-status"), "failed");
    tab.follow(".actions form[action$=\"/retry\"] button");
    assert_eq!(notice(&tab), format!("job {id} is pending again"));
    assert_eq!(tab.text("#job-status"), "pending");
    let job = read_job(&mut conn, id);
    assert_eq!((job.status, job.attempts), (JobStatus::Pending, 0));
    assert_shows_job(&tab, &job);
    tab.screenshot("after-retry-from-job-page");

    // Retry one from the failed list: its row's button.
    let id = mail[1];
    open(&tab, &site.url("/failed"), "Failed jobs");
    assert_eq!(
        tab.text("#count"),
        format!(
            "{} failed jobs match. Retry every one of them…",
            count_where(&mut conn, "status = 'failed'")
        )
    );
    tab.follow(&format!("#jobs tr[data-id=\"{id}\"] form.inline button"));
    assert_eq!(notice(&tab), format!("job {id} is pending again"));
    assert_eq!(tab.text("#job-status"), "pending");
    assert_eq!(read_job(&mut conn, id).status, JobStatus::Pending);
    tab.screenshot("after-retry-from-failed-list");
    open(&tab, &site.url("/failed"), "Failed jobs");
    assert!(!tab.exists(&format!("#jobs tr[data-id=\"{id}\"]")));
    assert_eq!(row_ids(&tab).len(), 4);

    // Retry every failed job of queue mail: filter, follow the link, read
    // how many it will touch, press the button. Queue media's stay failed.
    tab.fill("form.filters input[name=queue]", "mail");
    tab.submit("form.filters");
    tab.wait_for_text("#count", "2 failed jobs match.");
    tab.follow("#retry-all");
    tab.wait_for_text("main h1", "Retry failed jobs");
    let will = count_where(&mut conn, "status = 'failed' AND queue = 'mail'");
    assert_eq!(will, 2);
    assert_eq!(tab.text("#will-touch strong"), will.to_string());
    assert!(
        tab.text("#will-touch").starts_with(&format!(
            "This puts {will} failed jobs (queue mail) back to pending"
        )),
        "{}",
        tab.text("#will-touch")
    );
    assert_eq!(buttons(&tab), [format!("Retry {will} jobs")]);
    tab.screenshot("retry-all-confirm");
    tab.follow("form.inline button");
    assert_eq!(
        notice(&tab),
        format!("{will} failed jobs are pending again")
    );
    assert_eq!(
        count_where(&mut conn, "status = 'failed' AND queue = 'mail'"),
        0
    );
    assert_eq!(
        count_where(&mut conn, "status = 'pending' AND queue = 'mail'"),
        5
    );
    assert_eq!(
        count_where(&mut conn, "status = 'failed' AND queue = 'media'"),
        2
    );
    assert_eq!(
        tab.text("#count"),
        "2 failed jobs match. Retry every one of them…"
    );
    tab.screenshot("after-retry-all");

    // Pause queue mail from the overview, then resume it: the one button
    // of its row does either.
    open(&tab, &site.url("/"), "Overview");
    stop_refresh(&tab);
    let button = "#queues tr[data-queue=\"mail\"] form.inline button";
    for (label, done, state) in [
        ("Pause", "paused", "paused"),
        ("Resume", "resumed", "active"),
    ] {
        assert_eq!(tab.text(button), label);
        tab.follow(button);
        stop_refresh(&tab);
        assert_eq!(notice(&tab), format!("queue mail {done}"));
        assert_eq!(queue_paused(&mut conn, "mail"), state == "paused");
        assert!(!queue_paused(&mut conn, "media"));
        assert_eq!(tab.text("#queues tr[data-queue=\"mail\"] td.state"), state);
        assert_overview_matches(&tab, &mut conn);
        tab.screenshot(&format!("after-{}-queue", label.to_lowercase()));
    }

    // Set a rate limit on mail with the form under the table; the row shows
    // it with the starts in its window. A rate that is not one gets the
    // library's reason; the row's button removes the limit.
    let rate_of = |conn: &mut PgConnection| mail_queue(conn).rate_limit.map(|r| r.to_string());
    submit_mail_limit(&tab, "set-rate", "rate", "50/1h");
    stop_refresh(&tab);
    assert_eq!(
        notice(&tab),
        "queue mail: at most 50 jobs started per 1h by all runners together"
    );
    assert_eq!(rate_of(&mut conn), Some("50/1h".into()));
    assert_eq!(
        tab.text("#queues tr[data-queue=\"mail\"] td.rate"),
        "0 of 50/1h"
    );
    assert_overview_matches(&tab, &mut conn);
    tab.screenshot("after-set-rate");
    submit_mail_limit(&tab, "set-rate", "rate", "5/fortnight");
    assert_not_understood(&tab, "`fortnight` is not a unit");
    assert_eq!(rate_of(&mut conn), Some("50/1h".into()));
    press_mail_row_button(&tab, &site, "remove-rate");
    assert_eq!(notice(&tab), "queue mail: no rate limit");
    assert_eq!(rate_of(&mut conn), None);
    assert_overview_matches(&tab, &mut conn);

    // Likewise a key limit: set with its form (of two keyed jobs, the
    // first is admitted by its enqueue, the second waits), refused with the
    // library's reason, removed with the row's button (the waiting job is
    // admitted).
    let keys_of = |conn: &mut PgConnection| mail_queue(conn).key_limit.map(|k| k.to_string());
    submit_mail_limit(&tab, "set-keys", "keys", "ordered");
    stop_refresh(&tab);
    assert_eq!(
        notice(&tab),
        "queue mail: one job of a key at a time, in enqueue order, by all runners together"
    );
    assert_eq!(keys_of(&mut conn), Some("ordered".into()));
    let keyed = || {
        NewJob::new(
            "mail.send",
            "{}",
            JobOptions::new().queue("mail").concurrency_key("k"),
        )
        .expect("a keyed job")
    };
    enqueue_many(&mut conn, &[keyed(), keyed()]).expect("enqueue");
    open(&tab, &site.url("/"), "Overview");
    stop_refresh(&tab);
    assert_eq!(
        tab.text("#queues tr[data-queue=\"mail\"] td.keys"),
        "ordered"
    );
    assert_eq!(
        tab.text("#queues tr[data-queue=\"mail\"] td.keyed"),
        "1 held, 1 waiting"
    );
    assert_overview_matches(&tab, &mut conn);
    tab.screenshot("after-set-keys");
    submit_mail_limit(&tab, "set-keys", "keys", "0");
    assert_not_understood(&tab, "give 1 to 10000");
    assert_eq!(keys_of(&mut conn), Some("ordered".into()));
    press_mail_row_button(&tab, &site, "remove-keys");
    assert_eq!(notice(&tab), "queue mail: no key limit");
    assert_eq!(keys_of(&mut conn), None);
    assert_eq!(count_where(&mut conn, "status = 'waiting'"), 0);
    assert_overview_matches(&tab, &mut conn);

    // Cancel a pending job from its page.
    open(
        &tab,
        &site.url(&format!("/jobs/{pending}")),
        &format!("Job {pending}"),
    );
    assert_eq!(buttons(&tab), ["Cancel"]);
    tab.follow(".actions form[action$=\"/cancel\"] button");
    assert_eq!(notice(&tab), format!("job {pending} cancelled"));
    assert_eq!(tab.text("#job-status"), "cancelled");
    let job = read_job(&mut conn, pending);
    assert_eq!(job.status, JobStatus::Cancelled);
    assert_shows_job(&tab, &job);
    tab.screenshot("after-cancel");

    // Delete a completed job from its page.
    open(
        &tab,
        &site.url(&format!("/jobs/{finished}")),
        &format!("Job {finished}"),
    );
    assert_eq!(tab.text("#job-status"), "completed");
    assert_eq!(buttons(&tab), ["Delete"]);
    tab.follow(".actions form[action$=\"/delete\"] button");
    tab.wait_for_text("main h1", "Jobs");
    assert_eq!(notice(&tab), format!("job {finished} deleted"));
    assert_eq!(count_where(&mut conn, &format!("id = '{finished}'")), 0);
    assert!(!tab.exists(&format!("#jobs tr[data-id=\"{finished}\"]")));
    assert_eq!(row_ids(&tab), ids_where(&mut conn, "true"));
    tab.screenshot("after-delete");

    // The schedule: pause, resume, run now.
    let row = format!("#schedules tr[data-schedule=\"{SCHEDULE}\"]");
    open(&tab, &site.url("/schedules"), "Schedules");
    assert_eq!(tab.text(&format!("{row} td.state")), "active");
    for (action, state) in [("pause", "paused"), ("resume", "active")] {
        tab.follow(&format!("{row} form[action$=\"/{action}\"] button"));
        assert_eq!(notice(&tab), format!("schedule {SCHEDULE} {action}d"));
        assert_eq!(tab.text(&format!("{row} td.state")), state);
        assert_eq!(schedule_paused(&mut conn, SCHEDULE), state == "paused");
        tab.screenshot(&format!("after-{action}-schedule"));
    }
    assert_eq!(count_where(&mut conn, "job_type = 'test.noop'"), 0);
    tab.follow(&format!("{row} form[action$=\"/run\"] button"));
    let said = notice(&tab);
    let id: JobId = said
        .strip_prefix(&format!("schedule {SCHEDULE}: job "))
        .and_then(|rest| rest.strip_suffix(" enqueued"))
        .unwrap_or_else(|| panic!("notice: {said}"))
        .parse()
        .expect("a job id in the notice");
    assert_eq!(count_where(&mut conn, "job_type = 'test.noop'"), 1);
    let job = read_job(&mut conn, id);
    assert_eq!(
        (job.job_type.as_str(), job.status, &job.payload),
        (
            "test.noop",
            JobStatus::Pending,
            &serde_json::json!({ "n": 7 })
        )
    );
    assert!(!schedule_paused(&mut conn, SCHEDULE));
    tab.screenshot("after-run-schedule-now");
    assert!(tab.dialogs().is_empty(), "dialogs: {:?}", tab.dialogs());
}

/// Would run a script, set a flag and open an alert if a page put it in its
/// markup unescaped.
const SCRIPT: &str = "<script>window.__xss=1;alert(1)</script>";
/// Would add an element with an event handler.
const IMG: &str = "<img src=x onerror=\"window.__xss=2;alert(2)\">";
/// Would break out of a quoted attribute (and add an element).
const BREAKOUT: &str = "q\"><img src=x onerror=\"window.__xss=3;alert(3)\">";
/// Would break out of either kind of quoted attribute.
const QUOTES: &str = "k' onmouseover='window.__xss=4' \" onfocus=\"window.__xss=5\" autofocus x=\"";

/// Asserts that nothing hostile came of the page: no flag, no dialog, no
/// image, no script but the dashboard's own, no event handler attribute.
fn assert_inert(tab: &Tab, page: &str) {
    let found = tab.eval(
        "({xss: typeof window.__xss,
           images: document.querySelectorAll('img').length,
           scripts: Array.from(document.scripts, s => s.getAttribute('src')),
           handlers: Array.from(document.querySelectorAll('*')).flatMap(el =>
               Array.from(el.attributes).filter(a => a.name.startsWith('on'))
                   .map(a => el.tagName + ' ' + a.name)),
           autofocus: document.querySelectorAll('[autofocus]').length})",
    );
    assert_eq!(
        found,
        serde_json::json!({
            "xss": "undefined",
            "images": 0,
            "scripts": ["/static/app.js"],
            "handlers": [],
            "autofocus": 0,
        }),
        "{page}"
    );
    assert!(tab.dialogs().is_empty(), "{page}: {:?}", tab.dialogs());
}

#[test]
fn hostile_text_from_the_database_reads_back_verbatim_and_runs_nothing() {
    let (db, mut conn) = TestDb::connected();
    // Names are checked by the library, not by the table: a row another
    // client wrote may hold anything within the lengths.
    let job_type = format!("{SCRIPT}{IMG}");
    let queue = BREAKOUT;
    let payload = serde_json::json!({ "note": SCRIPT, "img": IMG, "quotes": QUOTES });
    let last_error = format!("{IMG}\n{SCRIPT}");
    let id = jobqueue_core::enqueue(
        &mut conn,
        &NewJob::new(
            "evil.type",
            &payload.to_string(),
            JobOptions::new().queue("evil").unique_key(QUOTES),
        )
        .expect("job"),
    )
    .expect("enqueue")
    .id();
    diesel::sql_query(
        "UPDATE jobqueue_jobs SET job_type = $2, queue = $3, last_error = $4,
             status = 'failed', finished_at = now(), attempts = 2,
             errors = jsonb_build_array(
                 jsonb_build_object('attempt', 1, 'at', now(), 'error', $5::text),
                 jsonb_build_object('attempt', 2, 'at', now(), 'error', $6::text))
         WHERE id = $1",
    )
    .bind::<Uuid, _>(id)
    .bind::<Text, _>(&job_type)
    .bind::<Text, _>(queue)
    .bind::<Text, _>(&last_error)
    .bind::<Text, _>(SCRIPT)
    .bind::<Text, _>(&last_error)
    .execute(&mut conn)
    .expect("make the job hostile");
    // A schedule of hostile name, job type and queue.
    let schedule_name = format!("s{BREAKOUT}");
    declare_schedule(&mut conn);
    diesel::sql_query(
        "UPDATE jobqueue_schedules SET name = $1, job_type = $2, queue = $3 WHERE name = $4",
    )
    .bind::<Text, _>(&schedule_name)
    .bind::<Text, _>(SCRIPT)
    .bind::<Text, _>(IMG)
    .bind::<Text, _>(SCHEDULE)
    .execute(&mut conn)
    .expect("make the schedule hostile");
    let job = read_job(&mut conn, id);
    let site = Site::start(DashboardConfig::new(&db.url));
    let browser = Browser::start();
    let tab = browser.new_tab();

    // The job's page: every field verbatim as text.
    open(
        &tab,
        &site.url(&format!("/jobs/{id}")),
        &format!("Job {id}"),
    );
    assert_inert(&tab, "job");
    assert_eq!(tab.text("#job-type"), job_type);
    assert_eq!(tab.text("#job-queue"), queue);
    assert_eq!(tab.text("#unique-key"), QUOTES);
    assert_eq!(tab.text("#last-error"), last_error);
    assert_eq!(
        tab.count("#facts *"),
        tab.count("#facts dt, #facts dd, #facts code, #facts span.status")
    );
    assert_eq!(
        tab.texts("#errors td.error pre"),
        [SCRIPT, last_error.as_str()]
    );
    assert_eq!(tab.count("#errors td.error pre *"), 0);
    assert_eq!(
        tab.text("#payload"),
        serde_json::to_string_pretty(&payload).expect("json")
    );
    assert_eq!(tab.count("#payload *"), 0);
    assert_shows_job(&tab, &job);
    tab.screenshot("hostile-job");

    // The job list: type, queue, the first line of the error.
    open(&tab, &site.url("/jobs"), "Jobs");
    assert_inert(&tab, "jobs");
    assert_eq!(
        only_row(&tab, "#jobs tbody tr", &[1, 2, 7]),
        [job_type.as_str(), queue, IMG]
    );
    // No markup in its cells but the link, its code and the status label.
    assert_eq!(tab.count("#jobs tbody td *"), 3);
    tab.screenshot("hostile-jobs");

    // The dead letter: the whole error.
    open(&tab, &site.url("/failed"), "Failed jobs");
    assert_inert(&tab, "failed");
    assert_eq!(
        only_row(&tab, "#jobs tbody tr", &[1, 2, 5]),
        [job_type.as_str(), queue, last_error.as_str()]
    );
    tab.screenshot("hostile-failed");

    // The overview: the queue's name in its row, its link and its forms.
    open(&tab, &site.url("/"), "Overview");
    stop_refresh(&tab);
    assert_inert(&tab, "overview");
    let names: Vec<String> = serde_json::from_value(tab.eval(
        "Array.from(document.querySelectorAll('#queues tr[data-queue]'), tr => tr.dataset.queue)",
    ))
    .expect("names");
    assert!(names.iter().any(|n| n == queue), "{names:?}");
    assert!(names.iter().any(|n| n == IMG), "{names:?}");
    assert_overview_matches(&tab, &mut conn);
    tab.screenshot("hostile-overview");

    // The schedules: name, job type, queue.
    open(&tab, &site.url("/schedules"), "Schedules");
    assert_inert(&tab, "schedules");
    assert_eq!(
        tab.attribute("#schedules tbody tr", "data-schedule")
            .as_deref(),
        Some(schedule_name.as_str())
    );
    assert_eq!(
        only_row(&tab, "#schedules tbody tr", &[0, 3, 4]),
        [schedule_name.as_str(), SCRIPT, IMG]
    );
    // No markup in its first five cells but the cron's code.
    assert_eq!(tab.count("#schedules tbody td:nth-child(-n+5) *"), 1);
    tab.screenshot("hostile-schedules");

    // Hostile text in the address: the notice, a filter's field.
    let notice_text = format!("</p>{SCRIPT}{BREAKOUT}");
    for path in [
        format!("/jobs/{id}?notice={}", encode(&notice_text)),
        format!("/jobs?notice={}", encode(&notice_text)),
        format!("/failed?notice={}", encode(&notice_text)),
        format!("/schedules?notice={}", encode(&notice_text)),
        format!("/?notice={}", encode(&notice_text)),
    ] {
        tab.goto(&site.url(&path));
        assert_eq!(notice(&tab), notice_text, "{path}");
        assert_eq!(tab.count("p.notice *"), 0, "{path}");
        assert_inert(&tab, &path);
    }
    tab.screenshot("hostile-notice");
    open(
        &tab,
        &site.url(&format!("/jobs?key={}", encode(QUOTES))),
        "Jobs",
    );
    assert_inert(&tab, "key filter");
    assert_eq!(tab.value("form.filters input[name=key]"), QUOTES);
    tab.screenshot("hostile-key-filter");
    open(&tab, &site.url("/failed/retry"), "Retry failed jobs");
    assert_inert(&tab, "retry-all confirmation");
    assert_eq!(tab.text("#will-touch strong"), "1");
    // A hostile name in a filter is refused (names are checked); the
    // refusal is text too.
    for path in [
        format!("/jobs?queue={}", encode(queue)),
        format!("/failed?type={}", encode(&job_type)),
        format!("/failed/retry?queue={}", encode(queue)),
    ] {
        tab.goto(&site.url(&path));
        assert_eq!(http_status(&tab), 400, "{path}");
        assert_inert(&tab, &path);
    }
    tab.screenshot("hostile-filter-refused");
    assert!(tab.dialogs().is_empty(), "dialogs: {:?}", tab.dialogs());
}

/// What a retry changes in a job's row.
fn retry_state(
    job: &JobRow,
) -> (
    JobStatus,
    i32,
    chrono::DateTime<chrono::Utc>,
    Option<chrono::DateTime<chrono::Utc>>,
) {
    (job.status, job.attempts, job.run_at, job.finished_at)
}

#[test]
fn forged_and_read_only_posts_are_refused_and_change_nothing() {
    let (db, mut conn) = TestDb::connected();
    let ids = put(&mut conn, 2, "mail.send", "mail");
    fail(&mut conn, &ids);
    let site = Site::start(DashboardConfig::new(&db.url));
    let browser = Browser::start();
    let tab = browser.new_tab();
    let before = retry_state(&read_job(&mut conn, ids[0]));

    // Sends the Retry form `form` once `tamper` (script applied to its
    // CSRF input) has changed it: refused, and the job is as it was.
    let mut refused_retry = |form: &str, tamper: &str, screenshot: &str| {
        tab.eval(&format!(
            "document.querySelector('{form} input[name=csrf]'){tamper}"
        ));
        tab.follow(&format!("{form} button"));
        assert_refused(&tab, "CSRF");
        assert_eq!(retry_state(&read_job(&mut conn, ids[0])), before);
        tab.screenshot(screenshot);
    };

    // The Retry form of the job's page, its CSRF input removed.
    let job_page = site.url(&format!("/jobs/{}", ids[0]));
    let retry = ".actions form[action$=\"/retry\"]";
    open(&tab, &job_page, &format!("Job {}", ids[0]));
    let token = tab.value(&format!("{retry} input[name=csrf]"));
    assert!(token.len() >= 16, "{token}");
    refused_retry(retry, ".remove()", "refused-no-csrf");

    // The Retry form of a failed-list row, its token altered.
    open(&tab, &site.url("/failed"), "Failed jobs");
    let row = format!("#jobs tr[data-id=\"{}\"]", ids[0]);
    refused_retry(
        &row,
        ".value = 'forged-' + Date.now()",
        "refused-altered-csrf",
    );

    // Read-only: no action anywhere, and a form made in the page, with a
    // real token of this database's other dashboard, is refused.
    let mut config = DashboardConfig::new(&db.url);
    config.read_only = true;
    let read_only = Site::start(config);
    for (path, title) in [
        ("/".to_owned(), "Overview".to_owned()),
        ("/jobs".to_owned(), "Jobs".to_owned()),
        (format!("/jobs/{}", ids[0]), format!("Job {}", ids[0])),
        ("/failed".to_owned(), "Failed jobs".to_owned()),
        (
            "/failed/retry?queue=mail".to_owned(),
            "Retry failed jobs".to_owned(),
        ),
        ("/workflows".to_owned(), "Workflows".to_owned()),
        ("/schedules".to_owned(), "Schedules".to_owned()),
    ] {
        open(&tab, &read_only.url(&path), &title);
        assert_eq!(tab.text("header .mode"), "read-only", "{path}");
        assert_eq!(tab.count("form[method=post], form.inline"), 0, "{path}");
        assert_eq!(tab.count("input[name=csrf]"), 0, "{path}");
        assert!(!tab.exists("#retry-all"), "{path}");
    }
    tab.screenshot("read-only-confirm");
    open(
        &tab,
        &read_only.url(&format!("/jobs/{}", ids[0])),
        &format!("Job {}", ids[0]),
    );
    tab.screenshot("read-only-job");
    for action in [
        format!("/jobs/{}/retry", ids[0]),
        "/queues/mail/pause".to_owned(),
    ] {
        tab.eval(&format!(
            "(() => {{ const f = document.createElement('form'); f.id = 'forged';
               f.method = 'post'; f.action = {};
               const i = document.createElement('input'); i.type = 'hidden';
               i.name = 'csrf'; i.value = {}; f.append(i);
               document.body.append(f); return true; }})()",
            serde_json::to_string(&action).expect("json"),
            serde_json::to_string(&token).expect("json"),
        ));
        tab.submit("form#forged");
        assert_refused(&tab, "read-only");
    }
    tab.screenshot("refused-read-only");
    assert_eq!(retry_state(&read_job(&mut conn, ids[0])), before);
    assert!(!queue_paused(&mut conn, "mail"));

    // The same Retry, untouched, on the read-write dashboard: done.
    open(&tab, &job_page, &format!("Job {}", ids[0]));
    tab.follow(&format!("{retry} button"));
    assert_eq!(notice(&tab), format!("job {} is pending again", ids[0]));
    assert_eq!(http_status(&tab), 200);
    assert_eq!(read_job(&mut conn, ids[0]).status, JobStatus::Pending);
    assert_eq!(read_job(&mut conn, ids[1]).status, JobStatus::Failed);
    tab.screenshot("after-genuine-retry");
    assert!(tab.dialogs().is_empty(), "dialogs: {:?}", tab.dialogs());
}

#[test]
fn every_button_of_a_hostile_name_acts_on_that_name_alone() {
    let (db, mut conn) = TestDb::connected();
    // `.` and `..` are names the library takes; the other only SQL can
    // write (the table checks lengths alone). Once raw in a form's path,
    // a browser resolved `..` and `?` in them: the third's Pause button
    // became "retry every failed job".
    put(&mut conn, 1, "mail.send", ".");
    put(&mut conn, 1, "mail.send", "..");
    let hostile = "x/../../failed/retry?";
    let moved = put(&mut conn, 1, "mail.send", "mail");
    diesel::sql_query("UPDATE jobqueue_jobs SET queue = $1 WHERE id = $2")
        .bind::<Text, _>(hostile)
        .bind::<Uuid, _>(moved[0])
        .execute(&mut conn)
        .expect("a queue of a hostile name");
    let failed = put(&mut conn, 1, "mail.send", "mail");
    fail(&mut conn, &failed);
    let schedules: Vec<Periodic> = [".", ".."]
        .iter()
        .map(|name| Periodic::new(*name, "0 3 * * *", &jobqueue_tests::jobs::Noop { n: 1 }))
        .collect();
    jobqueue_core::engine::declare_schedules(&mut conn, &schedules).expect("declare");
    let site = Site::start(DashboardConfig::new(&db.url));
    let browser = Browser::start();
    let tab = browser.new_tab();

    for name in [".", ".."] {
        let button = format!("#queues tr[data-queue=\"{name}\"] form.inline button");
        for (label, paused, said) in [("Pause", true, "paused"), ("Resume", false, "resumed")] {
            open(&tab, &site.url("/"), "Overview");
            stop_refresh(&tab);
            assert_eq!(tab.text(&button), label, "{name}");
            tab.follow(&button);
            stop_refresh(&tab);
            assert_eq!(notice(&tab), format!("queue {name} {said}"));
            assert_eq!(queue_paused(&mut conn, name), paused, "{name}");
        }
        let row = format!("#schedules tr[data-schedule=\"{name}\"]");
        for (action, said) in [("pause", "paused"), ("resume", "resumed")] {
            open(&tab, &site.url("/schedules"), "Schedules");
            tab.follow(&format!("{row} form[action$=\"/{action}\"] button"));
            assert_eq!(notice(&tab), format!("schedule {name} {said}"));
            assert_eq!(
                schedule_paused(&mut conn, name),
                action == "pause",
                "{name}"
            );
        }
        open(&tab, &site.url("/schedules"), "Schedules");
        tab.follow(&format!("{row} form[action$=\"/run\"] button"));
        assert!(
            notice(&tab).starts_with(&format!("schedule {name}: job ")),
            "{}",
            notice(&tab)
        );
    }
    assert_eq!(
        count_where(&mut conn, "job_type = 'test.noop'"),
        2,
        "one run each"
    );

    // The name only SQL could write: its button is refused as naming no
    // valid queue, and nothing else happens.
    open(&tab, &site.url("/"), "Overview");
    stop_refresh(&tab);
    tab.follow(&format!(
        "#queues tr[data-queue=\"{hostile}\"] form.inline button"
    ));
    assert_eq!(http_status(&tab), 400);
    assert!(
        tab.text("p.notice").contains("invalid queue"),
        "{}",
        tab.text("p.notice")
    );
    assert_eq!(
        read_job(&mut conn, failed[0]).status,
        JobStatus::Failed,
        "nothing retried"
    );
    assert_eq!(count_where(&mut conn, "status = 'failed'"), 1);
    tab.screenshot("hostile-name-refused");
}

/// Each drawn step's box as the browser laid it out: name -> (left, top,
/// right, bottom, fill color).
fn step_boxes(tab: &Tab) -> BTreeMap<String, (f64, f64, f64, f64, String)> {
    let boxes = tab.eval(
        "Object.fromEntries([...document.querySelectorAll('#workflow-graph g.step')].map(g => {
             const r = g.querySelector('rect').getBoundingClientRect();
             return [g.dataset.step, [r.left, r.top, r.right, r.bottom,
                                      getComputedStyle(g.querySelector('rect')).fill]];
         }))",
    );
    serde_json::from_value::<BTreeMap<String, (f64, f64, f64, f64, String)>>(boxes)
        .expect("the steps' boxes")
}

#[test]
fn a_workflows_graph_places_each_step_after_its_parents() {
    let (db, mut conn) = TestDb::connected();
    let job = || NewJob::new("flow.step", "{}", JobOptions::new()).expect("job");
    let mut flow = jobqueue_core::Workflow::new("diamond").expect("workflow");
    let a = flow.add_job("a", job()).expect("step");
    let b = flow.add_job("b", job()).expect("step");
    let c = flow.add_job("c", job()).expect("step");
    let d = flow.add_job("d", job()).expect("step");
    flow.after(b, [a]).expect("edge");
    flow.after(c, [a]).expect("edge");
    flow.after(d, [b, c]).expect("edge");
    let enqueued = flow.enqueue(&mut conn).expect("enqueue");
    // `a` completes: its box turns green, its edges solid.
    let lease = jobqueue_tests::claim_one(&mut conn, "browser-test");
    assert_eq!(lease.job_id, a.id());
    jobqueue_core::engine::complete(&mut conn, &lease).expect("complete a");

    let site = Site::start(DashboardConfig::new(&db.url));
    let browser = Browser::start();
    let tab = browser.new_tab();
    // Reached from the navigation: the list, then the workflow's link.
    open(&tab, &site.url("/"), "Overview");
    tab.follow("nav a[href='/workflows']");
    tab.wait_for_text("main h1", "Workflows");
    let row = format!("#workflows tr[data-workflow='{}']", enqueued.id);
    assert_eq!(tab.text(&format!("{row} td.state")), "running");
    tab.screenshot("workflows");
    tab.follow(&format!("{row} a"));
    tab.wait_for_text("main h1", "Workflow diamond");
    tab.screenshot("workflow");
    let boxes = step_boxes(&tab);
    assert_eq!(boxes.len(), 4, "{boxes:?}");
    let (ba, bb, bc, bd) = (&boxes["a"], &boxes["b"], &boxes["c"], &boxes["d"]);
    // Each step's box starts right of its parents' boxes; b and c, both
    // after a only, share a column.
    assert!(bb.0 > ba.2 && bc.0 > ba.2, "{boxes:?}");
    assert!(bd.0 > bb.2 && bd.0 > bc.2, "{boxes:?}");
    assert_eq!(bb.0, bc.0, "{boxes:?}");
    assert!(bb.3 <= bc.1 || bc.3 <= bb.1, "b and c overlap: {boxes:?}");
    // a completed: its fill differs from the others', which have not ended.
    assert_ne!(ba.4, bb.4, "{boxes:?}");
    assert_eq!(bb.4, bd.4);
    // Four edges, each from a parent's right side to its child's left.
    let edges = tab.eval(
        "[...document.querySelectorAll('#workflow-graph line.edge')].map(l => {
             const r = l.getBoundingClientRect(); return [r.left, r.right];
         })",
    );
    let edges: Vec<(f64, f64)> = serde_json::from_value(edges).expect("edges");
    assert_eq!(edges.len(), 4);
    for (left, right) in &edges {
        assert!(
            [ba.2, bb.2, bc.2].iter().any(|x| (x - left).abs() < 1.5),
            "an edge starts at no parent's right side: {edges:?} {boxes:?}"
        );
        assert!(
            [bb.0, bc.0, bd.0].iter().any(|x| (x - right).abs() < 1.5),
            "an edge ends at no child's left side: {edges:?} {boxes:?}"
        );
    }
    // The steps table: states as the database has them; a step's name opens
    // its job, whose page links back.
    assert_eq!(
        cells(&tab, "#workflow-steps tbody tr")
            .iter()
            .map(|row| (row[0].clone(), row[1].clone()))
            .collect::<Vec<_>>(),
        [
            ("a", "completed"),
            ("b", "live"),
            ("c", "live"),
            ("d", "live")
        ]
        .map(|(s, t)| (s.to_owned(), t.to_owned()))
    );
    tab.click("#workflow-steps tr[data-step=\"d\"] a");
    tab.wait_for_text("main h1", &format!("Job {}", d.id()));
    assert_eq!(facts(&tab)["status"], "blocked");
    tab.click("#workflow a");
    tab.wait_for_text("main h1", "Workflow diamond");
}

#[test]
fn a_declared_setting_changed_at_run_time_is_noted_in_its_queues_row_alone() {
    let (db, mut conn) = TestDb::connected();
    // mail: no code declares it; ledger and audit: declared, with a limit.
    put(&mut conn, 2, "mail.send", "mail");
    jobqueue_core::declare_queue(
        &mut conn,
        &QueueConfig::new("ledger").limit(jobqueue_core::GlobalLimit::new(3).expect("a limit")),
    )
    .expect("declare ledger");
    jobqueue_core::declare_queue(
        &mut conn,
        &QueueConfig::new("audit").limit(jobqueue_core::GlobalLimit::new(2).expect("a limit")),
    )
    .expect("declare audit");
    let site = Site::start(DashboardConfig::new(&db.url));
    let browser = Browser::start();
    let tab = browser.new_tab();
    let by_queue = |queues: &[(&str, &[&str])]| -> BTreeMap<String, Vec<String>> {
        queues
            .iter()
            .map(|(queue, notes)| {
                let notes = notes.iter().map(|n| (*n).to_owned()).collect();
                ((*queue).to_owned(), notes)
            })
            .collect()
    };

    // No note in any row, nothing to explain, in the overview as loaded now.
    let no_notes = |tab: &Tab| {
        open(tab, &site.url("/"), "Overview");
        stop_refresh(tab);
        assert_eq!(
            override_notes(tab),
            by_queue(&[("audit", &[]), ("ledger", &[]), ("mail", &[])])
        );
        assert!(!tab.exists("#overrides-note"));
    };

    // As declared.
    no_notes(&tab);
    assert_overview_matches(&tab, &mut conn);

    // An operator raises ledger's limit: ledger's row says so, as text
    // under its name with a tooltip that says why it stands; the others
    // say nothing.
    jobqueue_core::set_queue_limit(
        &mut conn,
        "ledger",
        Some(jobqueue_core::GlobalLimit::new(5).expect("a limit")),
    )
    .expect("raise the limit");
    open(&tab, &site.url("/"), "Overview");
    stop_refresh(&tab);
    assert_eq!(
        override_notes(&tab),
        by_queue(&[
            ("audit", &[]),
            ("ledger", &["limit 5 (code declares 3)"]),
            ("mail", &[])
        ])
    );
    let note = "#queues tr[data-queue=\"ledger\"] td:first-child li.override";
    assert_eq!(tab.text(note), "limit 5 (code declares 3)");
    assert_eq!(
        tab.attribute(note, "title").as_deref(),
        Some(
            "limit 5, set at run time (by an operator): it stands until the code declares \
             another value; the code declares limit 3."
        )
    );
    assert_eq!(
        tab.eval(&format!(
            "document.querySelector({}).checkVisibility()",
            serde_json::to_string(note).expect("json")
        )),
        serde_json::Value::Bool(true),
        "the note is shown"
    );
    // The explanation is on the page as text too, and the note points to it.
    assert_eq!(
        tab.attribute(note, "aria-describedby").as_deref(),
        Some("overrides-note")
    );
    let explained = tab.text("#overrides-note");
    assert!(
        explained.contains("stands until the code declares another value"),
        "{explained}"
    );
    assert_eq!(tab.text("#queues tr[data-queue=\"ledger\"] td.limit"), "5");
    assert_overview_matches(&tab, &mut conn);
    tab.screenshot("overview-override");

    // The code declares 5 in its turn: the setting is the code's again, and
    // the note is gone.
    jobqueue_core::declare_queue(
        &mut conn,
        &QueueConfig::new("ledger").limit(jobqueue_core::GlobalLimit::new(5).expect("a limit")),
    )
    .expect("declare ledger again");
    no_notes(&tab);
    assert!(tab.dialogs().is_empty(), "dialogs: {:?}", tab.dialogs());
}
