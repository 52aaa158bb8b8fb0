//! The testing kit's assertions on what was enqueued: each passes where it
//! should and fails where it should, with a message that says what was
//! enqueued; and a test transaction leaves nothing behind.

use chrono::{TimeDelta, Utc};
use diesel::prelude::*;
use jobqueue_core::{Counting, Job, JobOptions, JobStatus, NewJob};
use jobqueue_testing::{
    Drain, all_enqueued, assert_enqueued, enqueue_schedule, expect, refute_enqueued,
};
use jobqueue_tests::kit_jobs::{Act, Counter, Welcome, failure, registry};
use jobqueue_tests::{TestDb, assert_contains, count_where};

/// A fresh database, and a connection to it inside a test transaction.
fn in_test_transaction() -> (TestDb, PgConnection) {
    let (db, mut conn) = TestDb::connected();
    conn.begin_test_transaction()
        .expect("begin the test transaction");
    (db, conn)
}

fn welcome(to: &str) -> Welcome {
    Welcome { to: to.into() }
}

#[test]
fn assert_enqueued_finds_the_job_and_says_what_was_enqueued_when_it_is_not() {
    let (_db, mut conn) = in_test_transaction();
    welcome("bob@example.com")
        .enqueue(&mut conn)
        .expect("enqueue");
    Act::Complete.enqueue(&mut conn).expect("enqueue");
    let found = assert_enqueued::<Welcome>(&mut conn, |w| w.to == "bob@example.com");
    assert_eq!(found.job, welcome("bob@example.com"));
    assert_eq!((found.queue(), found.priority()), ("mail", 150));
    assert_eq!(found.status(), JobStatus::Pending);

    let message = failure(|| {
        assert_enqueued::<Welcome>(&mut conn, |w| w.to == "ada@example.com");
    });
    assert_contains(
        &message,
        &[
            "expected a job of type `kit.welcome` (jobqueue_tests::kit_jobs::Welcome) whose \
         payload the predicate accepts, blocked, waiting, scheduled, pending or unhandled; none was",
            "other `kit.welcome` jobs:\n  - kit.welcome in queue `mail`, priority 150, pending, due ",
            r#"{"to":"bob@example.com"}"#,
            "does not match: the predicate does not accept its payload",
            "jobs of other types (the latest 20 at most):\n  - kit.act in queue `default`, \
         priority 100, pending",
            r#""Complete""#,
        ],
    );
}

#[test]
fn a_failure_on_an_empty_queue_says_nothing_was_enqueued() {
    let (_db, mut conn) = in_test_transaction();
    let message = failure(|| {
        expect::<Welcome>().assert_enqueued(&mut conn);
    });
    assert_contains(
        &message,
        &["none was\n\nother `kit.welcome` jobs: none\n\njobs of other types"],
    );
    assert!(message.ends_with("at most): none"), "{message}");
}

#[test]
fn queue_priority_due_window_and_unique_key_narrow_the_match_and_say_why_not() {
    let (_db, mut conn) = in_test_transaction();
    let before = Utc::now();
    welcome("ada@example.com")
        .options()
        .delay(std::time::Duration::from_secs(3600))
        .unique_key("welcome:ada")
        .enqueue(&mut conn)
        .expect("enqueue");
    let in_an_hour = before + TimeDelta::hours(1);
    let found = expect::<Welcome>()
        .queue("mail")
        .priority(150)
        .due_between(
            in_an_hour - TimeDelta::minutes(1),
            in_an_hour + TimeDelta::minutes(1),
        )
        .unique_key("welcome:ada")
        .assert_enqueued_once(&mut conn);
    assert_eq!(found.status(), JobStatus::Scheduled);
    assert_eq!(found.unique_key(), Some("welcome:ada"));

    let long_ago = (before - TimeDelta::hours(2), before - TimeDelta::hours(1));
    let cases = [
        (
            "queue `mail`, not `other`",
            expect::<Welcome>().queue("other"),
        ),
        ("priority 150, not 1", expect::<Welcome>().priority(1)),
        (
            "not between ",
            expect::<Welcome>().due_between(long_ago.0, long_ago.1),
        ),
        (
            "unique key `welcome:ada`, not `welcome:bob`",
            expect::<Welcome>().unique_key("welcome:bob"),
        ),
    ];
    for (why, expectation) in cases {
        let message = failure(|| {
            expectation.assert_enqueued(&mut conn);
        });
        assert_contains(&message, &[why, "none was"]);
    }
}

#[test]
fn refute_enqueued_passes_on_none_and_lists_the_ones_it_found() {
    let (_db, mut conn) = in_test_transaction();
    welcome("ada@example.com")
        .enqueue(&mut conn)
        .expect("enqueue");
    refute_enqueued::<Welcome>(&mut conn, |w| w.to == "bob@example.com");
    expect::<Welcome>()
        .queue("other")
        .refute_enqueued(&mut conn);
    let message = failure(|| refute_enqueued::<Welcome>(&mut conn, |_| true));
    assert!(
        message.starts_with("expected no job of type `kit.welcome`"),
        "{message}"
    );
    assert_contains(
        &message,
        &[
            "; found 1\n\nmatching:\n  - kit.welcome",
            r#"{"to":"ada@example.com"}"#,
        ],
    );
}

#[test]
fn once_and_times_count_the_matching_jobs() {
    let (_db, mut conn) = in_test_transaction();
    for to in ["a@example.com", "a@example.com", "b@example.com"] {
        welcome(to).enqueue(&mut conn).expect("enqueue");
    }
    let both = expect::<Welcome>()
        .matching(|w| w.to == "a@example.com")
        .assert_enqueued_times(&mut conn, 2);
    assert!(both[0].id() < both[1].id(), "oldest first");
    expect::<Welcome>()
        .matching(|w| w.to == "b@example.com")
        .assert_enqueued_once(&mut conn);
    let message = failure(|| {
        expect::<Welcome>()
            .matching(|w| w.to == "a@example.com")
            .assert_enqueued_once(&mut conn);
    });
    assert_contains(
        &message,
        &[
            "expected exactly 1 job of type `kit.welcome`",
            "; found 2\n\nmatching:\n  - kit.welcome",
            "other `kit.welcome` jobs:\n  - ",
        ],
    );
}

#[test]
fn all_enqueued_decodes_every_waiting_job_of_the_type_and_status_looks_elsewhere() {
    let (_db, mut conn) = in_test_transaction();
    for to in ["a@example.com", "b@example.com"] {
        welcome(to).enqueue(&mut conn).expect("enqueue");
    }
    Act::Permanent.enqueue(&mut conn).expect("enqueue");
    let all: Vec<Welcome> = all_enqueued::<Welcome>(&mut conn)
        .into_iter()
        .map(|found| found.job)
        .collect();
    assert_eq!(all, [welcome("a@example.com"), welcome("b@example.com")]);
    assert_eq!(all_enqueued::<Act>(&mut conn).len(), 1);

    let counter = Counter::default();
    Drain::new(&registry(&counter))
        .queue("default")
        .run(&mut conn)
        .expect("drain");
    refute_enqueued::<Act>(&mut conn, |_| true);
    let failed = expect::<Act>()
        .status(JobStatus::Failed)
        .assert_enqueued_once(&mut conn);
    assert_eq!(failed.row.last_error.as_deref(), Some("never"));
    let message = failure(|| {
        expect::<Act>()
            .status(JobStatus::Completed)
            .status(JobStatus::Cancelled)
            .assert_enqueued(&mut conn);
    });
    assert_contains(&message, &[", completed or cancelled; none was"]);
}

#[test]
fn a_payload_that_does_not_decode_is_an_error_and_a_mismatch_that_says_so() {
    let (_db, mut conn) = in_test_transaction();
    let odd = NewJob::new("kit.welcome", r#"{"address": 7}"#, JobOptions::new()).expect("a job");
    jobqueue_core::enqueue(&mut conn, &odd).expect("enqueue");
    let error = expect::<Welcome>()
        .find(&mut conn)
        .expect_err("does not decode");
    assert!(
        matches!(error, jobqueue_core::Error::Deserialize { ref job_type, .. } if job_type == "kit.welcome"),
        "{error}"
    );
    let message = failure(|| {
        expect::<Welcome>().assert_enqueued(&mut conn);
    });
    assert_contains(
        &message,
        &["does not match: its payload does not decode as jobqueue_tests::kit_jobs::Welcome"],
    );
    let message = failure(|| {
        all_enqueued::<Welcome>(&mut conn);
    });
    assert_contains(
        &message,
        &["reading the enqueued jobs of type `kit.welcome`"],
    );
}

#[test]
fn a_test_transaction_leaves_nothing_behind() {
    let db = TestDb::new();
    {
        let mut conn = jobqueue_testing::connect(&db.url).expect("a test connection");
        welcome("ada@example.com")
            .enqueue(&mut conn)
            .expect("enqueue");
        for act in [Act::Complete, Act::Retry, Act::Spawn { left: 2 }] {
            act.enqueue(&mut conn).expect("enqueue");
        }
        let schedule = jobqueue_core::Periodic::new("nightly", "0 3 * * *", &Act::Complete);
        enqueue_schedule(&mut conn, &schedule).expect("enqueue the schedule's job");
        let counter = Counter::default();
        let drained = Drain::new(&registry(&counter))
            .recursive(5)
            .run(&mut conn)
            .expect("drain");
        assert!(drained.jobs.len() >= 6, "{drained}");
        // Seen inside: the retry waits, the completions were counted.
        assert_eq!(count_where(&mut conn, "status = 'scheduled'"), 1);
        assert!(count_completions(&mut conn) > 0);
    }
    let mut conn = db.conn();
    assert_eq!(count_where(&mut conn, "true"), 0, "no job is left");
    assert_eq!(count_completions(&mut conn), 0, "no completion is counted");
    let schedules = jobqueue_core::list_schedules(&mut conn).expect("schedules");
    assert!(schedules.is_empty(), "no schedule is left: {schedules:?}");
    let queues = jobqueue_core::list_queues(&mut conn, Counting::WithHistory).expect("queues");
    assert!(queues.is_empty(), "no queue is left: {queues:?}");
}

/// The completions counted, of every minute.
fn count_completions(conn: &mut PgConnection) -> i64 {
    #[derive(QueryableByName)]
    struct Sum {
        #[diesel(sql_type = diesel::sql_types::BigInt)]
        n: i64,
    }
    diesel::sql_query("SELECT coalesce(sum(completed), 0)::int8 AS n FROM jobqueue_completions")
        .get_result::<Sum>(conn)
        .expect("count completions")
        .n
}
