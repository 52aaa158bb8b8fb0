//! Enqueue hooks run on every path that enqueues from Rust (one job, one
//! with a unique key, a batch, a batch through `COPY`, a workflow,
//! diesel-async, the command line of a binary that installs them, the
//! testing kit's `perform`): what they stamp is stored, where they move a
//! job is where it goes, and a job they refuse fails its enqueue with the
//! hook's reason, inserts nothing of its batch, and leaves the caller's
//! transaction usable.
//!
//! Hooks are the process's: this module's (`jobs::HookedStamp`) acts on
//! `test.hooked` jobs alone, which no other test enqueues.

use diesel::connection::SimpleConnection;
use jobqueue_core::{
    Error, Job, JobOptions, JobRow, NewJob, Workflow, enqueue, enqueue_async, enqueue_many,
    enqueue_many_async,
};
use jobqueue_tests::jobs::{Hooked, Noop, install_hooked_stamp, registry};
use jobqueue_tests::{TestDb, count_where, read_job, run_cli};

const CLI: &str = env!("CARGO_BIN_EXE_jobqueue-test-worker");

fn hooked(n: u64) -> Hooked {
    Hooked {
        n,
        refuse: false,
        move_to: None,
    }
}

fn job(hooked: &Hooked) -> NewJob {
    NewJob::from_job(hooked, JobOptions::new().tag("given")).expect("a job")
}

fn assert_stamped(row: &JobRow) {
    assert_eq!(
        row.meta("hooked"),
        Some(&serde_json::json!("yes")),
        "{row:?}"
    );
    assert_eq!(
        row.tags.as_deref(),
        Some(&["given".to_owned(), "hooked".to_owned()][..]),
        "the hook's tag after the enqueuer's"
    );
}

#[test]
fn every_path_stores_what_the_hooks_stamp() {
    install_hooked_stamp();
    let (_db, mut conn) = TestDb::connected();
    let one = enqueue(&mut conn, &job(&hooked(1))).expect("one").id();
    let unique = NewJob::from_job(&hooked(2), JobOptions::new().tag("given").unique_key("u"))
        .expect("a job");
    enqueue(&mut conn, &unique).expect("unique");
    let small: Vec<NewJob> = (3..6).map(|n| job(&hooked(n))).collect();
    enqueue_many(&mut conn, &small).expect("a small batch");
    let copied: Vec<NewJob> = (0..300).map(|n| job(&hooked(n))).collect();
    enqueue_many(&mut conn, &copied).expect("a batch through COPY");
    let mut workflow = Workflow::new("hooked").expect("a workflow");
    workflow.add_job("only", job(&hooked(7))).expect("a step");
    let steps = workflow.enqueue(&mut conn).expect("the workflow");
    let derived = hooked(8)
        .options()
        .tag("given")
        .enqueue(&mut conn)
        .expect("derived")
        .id();

    for id in [
        one,
        unique.id(),
        small[2].id(),
        copied[299].id(),
        steps.steps[0].1,
        derived,
    ] {
        assert_stamped(&read_job(&mut conn, id));
    }
    // Other job types pass through untouched.
    let noop = Noop { n: 1 }.enqueue(&mut conn).expect("a noop").id();
    assert_eq!(read_job(&mut conn, noop).metadata, None);
}

#[tokio::test]
async fn the_async_enqueue_runs_them_too() {
    use diesel_async::{AsyncConnection, AsyncPgConnection};
    install_hooked_stamp();
    let db = TestDb::new();
    let mut conn = AsyncPgConnection::establish(&db.url)
        .await
        .expect("connect");
    let one = job(&hooked(1));
    enqueue_async(&mut conn, &one).await.expect("one");
    let many = [job(&hooked(2)), job(&hooked(3))];
    enqueue_many_async(&mut conn, &many).await.expect("many");
    let refused = enqueue_async(
        &mut conn,
        &job(&Hooked {
            refuse: true,
            ..hooked(4)
        }),
    )
    .await
    .expect_err("refused");
    assert!(matches!(refused, Error::Refused { .. }), "{refused}");
    let mut sync = db.conn();
    for id in [one.id(), many[1].id()] {
        assert_stamped(&read_job(&mut sync, id));
    }
    assert_eq!(count_where(&mut sync, "true"), 3);
}

#[test]
fn a_hook_moves_a_job_to_another_queue_at_another_priority() {
    install_hooked_stamp();
    let (_db, mut conn) = TestDb::connected();
    let moved = Hooked {
        move_to: Some("vip".into()),
        ..hooked(1)
    };
    let id = moved.enqueue(&mut conn).expect("enqueue").id();
    let row = read_job(&mut conn, id);
    assert_eq!((row.queue.as_str(), row.priority), ("vip", 900));
    let bad = Hooked {
        move_to: Some("no spaces allowed".into()),
        ..hooked(2)
    };
    let refused = bad.enqueue(&mut conn).expect_err("a bad queue").to_string();
    assert!(
        refused.contains("an enqueue hook refused the job of type `test.hooked`")
            && refused.contains("invalid queue"),
        "the hook's change is checked as an option is: {refused}"
    );
}

#[test]
fn a_refused_job_inserts_nothing_of_its_batch_and_the_transaction_goes_on() {
    install_hooked_stamp();
    let (_db, mut conn) = TestDb::connected();
    conn.batch_execute("BEGIN").expect("begin");
    let batch: Vec<NewJob> = (0..300)
        .map(|n| {
            job(&Hooked {
                refuse: n == 150,
                ..hooked(n)
            })
        })
        .collect();
    let refused = enqueue_many(&mut conn, &batch).expect_err("one job is refused");
    let Error::Refused { job_type, reason } = &refused else {
        panic!("not a refusal: {refused}");
    };
    assert_eq!(
        (job_type.as_str(), reason.as_str()),
        ("test.hooked", "job 150 asked to be refused")
    );
    // The caller's transaction is not aborted: it goes on and commits.
    enqueue(&mut conn, &job(&hooked(1))).expect("the next enqueue");
    conn.batch_execute("COMMIT").expect("commit");
    assert_eq!(count_where(&mut conn, "true"), 1);
}

#[test]
fn the_command_line_of_a_binary_with_hooks_runs_them() {
    let (db, mut conn) = TestDb::connected();
    let enqueue_cli = |payload: &str| {
        let out = std::process::Command::new(CLI)
            .env("JOBQUEUE_TEST_HOOKS", "1")
            .args(["--database-url", &db.url, "enqueue", "test.hooked", payload])
            .output()
            .expect("run the worker binary");
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    let (code, out, err) = enqueue_cli(r#"{"n": 1, "refuse": false, "move_to": null}"#);
    assert_eq!(code, Some(0), "{err}");
    let row = read_job(&mut conn, out.trim().parse().expect("an id"));
    assert_eq!(row.meta("hooked"), Some(&serde_json::json!("yes")));
    let (code, _, err) = enqueue_cli(r#"{"n": 2, "refuse": true, "move_to": null}"#);
    assert_eq!(code, Some(2), "a refusal is the input's fault: {err}");
    assert!(err.contains("job 2 asked to be refused"), "{err}");
    // Without the hooks, the same binary stamps nothing.
    let (code, out, err) = run_cli(
        CLI,
        &db.url,
        &[
            "enqueue",
            "test.hooked",
            r#"{"n": 3, "refuse": true, "move_to": null}"#,
        ],
    );
    assert_eq!(code, Some(0), "{err}");
    let row = read_job(&mut conn, out.trim().parse().expect("an id"));
    assert_eq!(row.metadata, None);
}

#[test]
fn the_kits_perform_and_drain_see_the_job_as_the_hooks_left_it() {
    install_hooked_stamp();
    let registry = registry();
    let done = jobqueue_testing::perform(&registry, &hooked(1))
        .run()
        .expect("performed");
    assert_eq!(done.outcome, jobqueue_runner::inline::Outcome::Completed);
    let (_db, mut conn) = TestDb::connected();
    hooked(2).enqueue(&mut conn).expect("enqueue");
    let drained = jobqueue_testing::Drain::new(&registry)
        .run(&mut conn)
        .expect("drain");
    assert!(
        matches!(drained.jobs[..], [ref job] if job.ended == jobqueue_testing::Ended::Completed),
        "{drained}"
    );
}

#[test]
fn a_schedules_job_is_hooked_when_declared_and_each_slot_copies_it() {
    install_hooked_stamp();
    let (_db, mut conn) = TestDb::connected();
    let every = jobqueue_core::Periodic::new("hooked-every-second", "* * * * * *", &hooked(9));
    let id = jobqueue_testing::enqueue_schedule(&mut conn, &every).expect("run now");
    assert_stamped_by_hook(&read_job(&mut conn, id));
    let refusing = jobqueue_core::Periodic::new(
        "refused-every-second",
        "* * * * * *",
        &Hooked {
            refuse: true,
            ..hooked(10)
        },
    );
    let refused = jobqueue_core::engine::declare_schedules(&mut conn, &[refusing])
        .expect_err("the hook refuses its job");
    assert!(matches!(refused, Error::Refused { .. }), "{refused}");
}

/// What the hook stamps, on a job enqueued without tags of its own.
fn assert_stamped_by_hook(row: &JobRow) {
    assert_eq!(
        row.meta("hooked"),
        Some(&serde_json::json!("yes")),
        "{row:?}"
    );
    assert_eq!(row.tags.as_deref(), Some(&["hooked".to_owned()][..]));
}
