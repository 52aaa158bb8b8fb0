//! Tags and metadata: every enqueue path stores them as given (one job,
//! one with a unique key, a small batch, a batch through `COPY`, a
//! workflow, diesel-async, the command line); bad ones are refused naming
//! what is wrong; lists select by tag a window at a time, reading at most
//! two windows of the table per page however many jobs carry the tag or
//! none; the testing kit's expectations match them.

use diesel::prelude::*;
use jobqueue_core::browse::{JobOrder, JobQuery, SEARCH_WINDOW, browse_jobs, count_jobs};
use jobqueue_core::{
    Error, Job, JobOptions, JobRow, NewJob, Workflow, enqueue, enqueue_many, enqueue_many_async,
};
use jobqueue_tests::jobs::Noop;
use jobqueue_tests::{
    TestDb, autovacuum_off, counting, exec, json_lines, read_job, run_cli, scalar,
};
use serde_json::json;

const CLI: &str = env!("CARGO_BIN_EXE_jobqueue-test-worker");

/// Options with two tags (one of them spelled like SQL's NULL) and
/// metadata holding what text formats escape.
fn tagged() -> JobOptions {
    JobOptions::new()
        .tag("tenant:42")
        .tag("NULL")
        .tag("tenant:42")
        .meta("user", json!({"id": 7, "name": "Ada\tLovelace\\n"}))
        .meta("source", "import\nline 2")
}

fn assert_tagged(row: &JobRow) {
    assert_eq!(
        row.tags.as_deref(),
        Some(&["tenant:42".to_owned(), "NULL".to_owned()][..]),
        "the tags, in order, each once"
    );
    assert_eq!(
        row.metadata,
        Some(json!({"user": {"id": 7, "name": "Ada\tLovelace\\n"}, "source": "import\nline 2"}))
    );
    assert!(row.has_tag("NULL") && !row.has_tag("tenant"));
    assert_eq!(row.meta("source"), Some(&json!("import\nline 2")));
}

fn job(n: u64, options: JobOptions) -> NewJob {
    NewJob::from_job(&Noop { n }, options).expect("a job")
}

#[test]
fn every_enqueue_path_stores_tags_and_metadata_as_given() {
    let (_db, mut conn) = TestDb::connected();
    let one = enqueue(&mut conn, &job(1, tagged())).expect("one").id();
    let unique = enqueue(&mut conn, &job(2, tagged().unique_key("u")))
        .expect("unique")
        .id();
    let small: Vec<NewJob> = (0..3).map(|n| job(n, tagged())).collect();
    enqueue_many(&mut conn, &small).expect("a small batch");
    // 300 jobs go through COPY: half tagged, half bare.
    let copied: Vec<NewJob> = (0..300)
        .map(|n| {
            job(
                n,
                if n % 2 == 0 {
                    tagged()
                } else {
                    JobOptions::new()
                },
            )
        })
        .collect();
    enqueue_many(&mut conn, &copied).expect("a copied batch");
    let mut workflow = Workflow::new("tagged").expect("a workflow");
    let first = workflow.add_job("first", job(1, tagged())).expect("a step");
    let second = workflow
        .add_job("second", job(2, JobOptions::new()))
        .expect("a step");
    workflow.after(second, [first]).expect("an edge");
    let steps = workflow.enqueue(&mut conn).expect("the workflow");

    for id in [one, unique, small[2].id(), copied[0].id(), steps.steps[0].1] {
        assert_tagged(&read_job(&mut conn, id));
    }
    for id in [copied[1].id(), steps.steps[1].1] {
        let bare = read_job(&mut conn, id);
        assert_eq!((bare.tags, bare.metadata), (None, None), "stored as NULL");
    }
    assert_eq!(
        scalar(
            &mut conn,
            "SELECT count(*) AS n FROM jobqueue_jobs WHERE tags @> ARRAY['NULL']"
        ),
        1 + 1 + 3 + 150 + 1
    );
}

#[tokio::test]
async fn an_async_enqueue_stores_them_too() {
    use diesel_async::{AsyncConnection, AsyncPgConnection};
    let db = TestDb::new();
    let mut conn = AsyncPgConnection::establish(&db.url)
        .await
        .expect("connect");
    let jobs = [job(1, tagged()), job(2, tagged().unique_key("k"))];
    enqueue_many_async(&mut conn, &jobs).await.expect("enqueue");
    jobqueue_core::enqueue_async(&mut conn, &job(3, tagged()))
        .await
        .expect("enqueue one");
    let mut sync = db.conn();
    for job in &jobs {
        assert_tagged(&read_job(&mut sync, job.id()));
    }
}

#[test]
fn bad_tags_and_metadata_are_refused_naming_what_is_wrong() {
    let refused = |options: JobOptions| match NewJob::from_job(&Noop { n: 1 }, options) {
        Err(e @ Error::InvalidOption { .. }) => e.to_string(),
        other => panic!("expected a refusal, got {other:?}"),
    };
    let many = refused(JobOptions::new().tags((0..17).map(|n| format!("t{n}"))));
    assert!(
        many.contains("17 tags") && many.contains("at most 16"),
        "{many}"
    );
    let space = refused(JobOptions::new().tag("two words"));
    assert!(space.contains("' '") && space.contains("tags"), "{space}");
    let empty = refused(JobOptions::new().tag(""));
    assert!(empty.contains("1 to 64"), "{empty}");
    let long = refused(JobOptions::new().tag("x".repeat(65)));
    assert!(long.contains("it has 65"), "{long}");
    let big = refused(JobOptions::new().meta("blob", "x".repeat(70_000)));
    assert!(big.contains("metadata") && big.contains("65536"), "{big}");
    let nul = refused(JobOptions::new().meta("k", "a\u{0}b"));
    assert!(nul.contains("metadata"), "{nul}");
}

#[test]
fn lists_select_by_tag_newest_first_page_by_page() {
    let (_db, mut conn) = TestDb::connected();
    let jobs: Vec<NewJob> = (0..30)
        .map(|n| {
            let options = if n % 3 == 0 {
                JobOptions::new().tag("vip").tag("eu")
            } else {
                JobOptions::new().tag("eu")
            };
            job(n, options)
        })
        .collect();
    enqueue_many(&mut conn, &jobs).expect("enqueue");
    let vip: Vec<_> = jobs.iter().step_by(3).rev().map(NewJob::id).collect();
    let mut query = JobQuery {
        tag: Some("vip".into()),
        ..JobQuery::default()
    };
    let first = browse_jobs(&mut conn, &query, 6).expect("a page");
    query.cursor = first.next;
    let second = browse_jobs(&mut conn, &query, 6).expect("the next page");
    let listed: Vec<_> = first
        .jobs
        .iter()
        .chain(&second.jobs)
        .map(|j| j.id)
        .collect();
    assert_eq!(listed, vip, "the vip jobs, newest first, over two pages");
    assert!(second.next.is_none());
    let counted = count_jobs(
        &mut conn,
        &JobQuery {
            tag: Some("eu".into()),
            ..JobQuery::default()
        },
        100,
    )
    .expect("a count");
    assert_eq!((counted.n, counted.capped), (30, false));
    let none = JobQuery {
        tag: Some("nobody".into()),
        ..JobQuery::default()
    };
    assert!(
        browse_jobs(&mut conn, &none, 10)
            .expect("a page")
            .jobs
            .is_empty()
    );
    let by_run_at = JobQuery {
        tag: Some("vip".into()),
        status: Some(jobqueue_core::JobStatus::Pending),
        order: JobOrder::RunAt,
        ..JobQuery::default()
    };
    let refused = browse_jobs(&mut conn, &by_run_at, 10)
        .expect_err("by run_at")
        .to_string();
    assert!(refused.contains("newest first only"), "{refused}");
}

/// 10 jobs tagged `rare` (the oldest), 50,000 tagged `common`, then
/// 250,000 newer jobs without tags: a list of either tag reads the tagged
/// jobs newest first in windows, never every job the tag is on nor any
/// job without tags, and finds the oldest in its first window.
#[test]
fn a_tag_list_reads_at_most_two_windows_of_tagged_jobs_per_page() {
    let (_db, mut conn) = TestDb::connected();
    autovacuum_off(&mut conn);
    // Ids rise with time, as UUIDv7 ids do: the rows' order is the
    // newest-first order of the list.
    let rows = |conn: &mut PgConnection, from: i64, n: i64, tags: &str| {
        exec(
            conn,
            &format!(
                "INSERT INTO jobqueue_jobs (id, job_type, queue, status, run_at, finished_at, tags)
                 SELECT ('00000000-0000-7000-8000-' || lpad(to_hex(g), 12, '0'))::uuid,
                        'plan.job', 'default', 'failed', now(), now(), {tags}
                 FROM generate_series({from}, {}) AS g",
                from + n - 1
            ),
        )
    };
    rows(&mut conn, 1, 10, "ARRAY['rare']");
    rows(&mut conn, 11, 50_000, "ARRAY['common', 'eu']");
    rows(&mut conn, 50_011, 250_000, "NULL");
    exec(&mut conn, "ANALYZE jobqueue_jobs");

    for tag in ["rare", "common", "absent"] {
        let mut query = JobQuery {
            tag: Some(tag.into()),
            ..JobQuery::default()
        };
        let mut found = 0;
        let mut pages = 0;
        loop {
            let (page, read) = counting(&mut conn, |conn| {
                browse_jobs(conn, &query, 50).expect("a page")
            });
            // The window's floor (the tagged index, up to a window), then
            // the window's tagged jobs: 50,010 of each at most here.
            let tagged = 50_010.min(SEARCH_WINDOW);
            assert!(
                read <= 2 * tagged + 100,
                "a page of tag {tag} read {read} rows and index entries"
            );
            found += page.jobs.len();
            pages += 1;
            match page.next.or(page.searched_to) {
                Some(cursor) if found < 50 => query.cursor = Some(cursor),
                _ => break,
            }
        }
        let expected = match tag {
            "rare" => 10,
            "common" => 50,
            _ => 0,
        };
        assert_eq!(
            (found, pages),
            (expected, 1),
            "jobs found of tag {tag}, and pages read"
        );
    }
}

#[test]
fn the_command_line_enqueues_lists_and_shows_tags_and_metadata() {
    let (db, mut conn) = TestDb::connected();
    let (code, out, err) = run_cli(
        CLI,
        &db.url,
        &[
            "enqueue",
            "test.noop",
            r#"{"n": 1}"#,
            "--tag",
            "tenant:42",
            "--tag",
            "vip",
            "--meta",
            "user=7",
            "--meta",
            "source=import",
        ],
    );
    assert_eq!(code, Some(0), "{err}");
    let id = out.trim().to_owned();
    let row = read_job(&mut conn, id.parse().expect("an id"));
    assert_eq!(
        (row.tags, row.metadata),
        (
            Some(vec!["tenant:42".into(), "vip".into()]),
            Some(json!({"user": 7, "source": "import"}))
        )
    );
    enqueue(&mut conn, &job(2, JobOptions::new().tag("other"))).expect("another");

    let (code, out, err) = run_cli(CLI, &db.url, &["list", "--tag", "vip", "--json"]);
    assert_eq!(code, Some(0), "{err}");
    let lines = json_lines(&out);
    assert_eq!(lines.len(), 1, "{out}");
    assert_eq!(lines[0]["id"], json!(id));
    assert_eq!(lines[0]["tags"], json!(["tenant:42", "vip"]));

    let (code, out, err) = run_cli(CLI, &db.url, &["show", &id, "--json"]);
    assert_eq!(code, Some(0), "{err}");
    let shown: serde_json::Value = serde_json::from_str(&out).expect("a JSON document");
    assert_eq!(shown["metadata"], json!({"user": 7, "source": "import"}));
    let (_, text, _) = run_cli(CLI, &db.url, &["show", &id]);
    assert!(text.contains("tags:          tenant:42 vip"), "{text}");

    let (code, _, err) = run_cli(
        CLI,
        &db.url,
        &["enqueue", "test.noop", r#"{"n": 1}"#, "--tag", "a b"],
    );
    assert_eq!(code, Some(2), "a bad tag is a usage error: {err}");
    assert!(err.contains("tags") && err.contains("' '"), "{err}");
    let (code, _, err) = run_cli(
        CLI,
        &db.url,
        &["enqueue", "test.noop", r#"{"n": 1}"#, "--meta", "novalue"],
    );
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("KEY=VALUE"), "{err}");
}

#[test]
fn the_kits_expectations_match_tags_and_metadata() {
    let (_db, mut conn) = TestDb::connected();
    enqueue(&mut conn, &job(1, tagged())).expect("enqueue");
    jobqueue_testing::expect::<Noop>()
        .tag("tenant:42")
        .meta("source", "import\nline 2")
        .assert_enqueued_once(&mut conn);
    let missed = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        jobqueue_testing::expect::<Noop>()
            .tag("tenant:43")
            .meta("source", "elsewhere")
            .assert_enqueued(&mut conn);
    }))
    .expect_err("no job carries tenant:43");
    let message = missed.downcast_ref::<String>().cloned().unwrap_or_default();
    assert!(
        message.contains("tagged `tenant:43`")
            && message.contains("not `tenant:43`")
            && message.contains("metadata `source` \"import\\nline 2\", not \"elsewhere\""),
        "{message}"
    );
}

#[test]
fn a_job_type_keeps_its_defaults_beside_tags() {
    let (_db, mut conn) = TestDb::connected();
    let id = Noop { n: 5 }
        .options()
        .tag("x")
        .meta("by", "test")
        .enqueue(&mut conn)
        .expect("enqueue")
        .id();
    let row = read_job(&mut conn, id);
    assert_eq!(row.queue, Noop::QUEUE);
    assert!(row.has_tag("x"));
    assert_eq!(row.meta("by"), Some(&json!("test")));
}

#[test]
fn a_periodic_jobs_slots_carry_its_tags_and_metadata() {
    use jobqueue_core::Periodic;
    use jobqueue_core::engine::{declare_schedules, fire_due};
    let (_db, mut conn) = TestDb::connected();
    let nightly = Periodic::with_options(
        "tagged-every-second",
        "* * * * * *",
        &Noop { n: 1 },
        JobOptions::new().tag("cron").meta("by", "schedule"),
    );
    // Run now, by the testing kit, and a slot fired by a runner's pass.
    let now = jobqueue_testing::enqueue_schedule(&mut conn, &nightly).expect("run now");
    declare_schedules(&mut conn, std::slice::from_ref(&nightly)).expect("declare");
    exec(
        &mut conn,
        "UPDATE jobqueue_schedules SET last_slot = now() - interval '3 seconds'",
    );
    let pass = fire_due(&mut conn, std::slice::from_ref(&nightly)).expect("fire");
    assert_eq!(pass.fired, [("tagged-every-second".to_owned(), 1)]);
    let fired = scalar(
        &mut conn,
        "SELECT count(*) AS n FROM jobqueue_jobs
         WHERE tags = ARRAY['cron'] AND metadata = '{\"by\": \"schedule\"}'",
    );
    assert_eq!(fired, 2, "the job run now and the slot's");
    assert!(read_job(&mut conn, now).has_tag("cron"));
}
