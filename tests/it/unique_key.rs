//! At most one live job per unique key; finished jobs do not block. A clash
//! is an outcome naming the holder, single or batch alike, and leaves the
//! caller's transaction usable.

use diesel::prelude::*;
use jobqueue_core::engine::{Claim, claim, complete};
use jobqueue_core::{
    Duplicate, EnqueueOutcome, Error, JobId, JobOptions, NewJob, enqueue, enqueue_many,
};
use jobqueue_tests::{TestDb, count_where, put};

fn keyed(key: &str) -> NewJob {
    NewJob::new("report.build", "{}", JobOptions::new().unique_key(key)).expect("valid")
}

/// The holder named by a duplicate outcome, or a panic naming what came.
fn holder(outcome: Result<EnqueueOutcome, Error>) -> JobId {
    match outcome {
        Ok(EnqueueOutcome::Duplicate(Duplicate { existing, .. })) => existing,
        other => panic!("expected a duplicate, got {other:?}"),
    }
}

#[test]
fn second_live_job_is_a_duplicate_naming_the_holder() {
    let (_db, mut conn) = TestDb::connected();
    let first = enqueue(&mut conn, &keyed("report:42"))
        .expect("first")
        .inserted()
        .expect("inserted");
    let second = keyed("report:42");
    match enqueue(&mut conn, &second).expect("second") {
        EnqueueOutcome::Duplicate(duplicate) => {
            assert_eq!(duplicate.unique_key, "report:42");
            assert_eq!(duplicate.existing, first);
            assert_eq!(duplicate.job, second.id(), "the id it would have had");
        }
        other => panic!("expected a duplicate, got {other:?}"),
    }
    assert_eq!(count_where(&mut conn, "unique_key = 'report:42'"), 1);
    // Still a duplicate while the holder is claimed (live).
    let held = claim(&mut conn, &Claim::new("w")).expect("claim");
    assert_eq!(holder(enqueue(&mut conn, &keyed("report:42"))), first);
    // Once it finished, the key is free again.
    complete(&mut conn, &held[0].lease()).expect("complete");
    let again = enqueue(&mut conn, &keyed("report:42")).expect("after finish");
    assert!(!again.is_duplicate());
    assert_ne!(again.id(), first);
    assert_eq!(count_where(&mut conn, "unique_key = 'report:42'"), 2);
    // Other keys and keyless jobs are unaffected.
    let other = enqueue(&mut conn, &keyed("report:43")).expect("other key");
    assert!(other.inserted().is_some());
    for _ in 0..2 {
        let keyless = NewJob::new("report.build", "{}", JobOptions::new()).expect("valid");
        let outcome = enqueue(&mut conn, &keyless).expect("no key");
        assert_eq!(outcome, EnqueueOutcome::Inserted(keyless.id()));
    }
}

#[test]
fn a_duplicate_does_not_abort_the_callers_transaction() {
    let (_db, mut conn) = TestDb::connected();
    let first = enqueue(&mut conn, &keyed("k")).expect("first").id();
    conn.transaction::<_, Error, _>(|conn| {
        diesel::sql_query("CREATE TABLE users (email text)").execute(conn)?;
        assert_eq!(holder(enqueue(conn, &keyed("k"))), first);
        // The transaction goes on: these commit with it.
        diesel::sql_query("INSERT INTO users VALUES ('a@example.com')").execute(conn)?;
        enqueue(conn, &keyed("k2"))?;
        Ok(())
    })
    .expect("transaction commits");
    assert_eq!(count_where(&mut conn, "unique_key IN ('k', 'k2')"), 2);
    assert_eq!(
        jobqueue_tests::scalar(&mut conn, "SELECT count(*) AS n FROM users"),
        1,
        "the caller's own write committed"
    );
}

#[test]
fn batch_reports_held_and_repeated_keys_as_duplicates() {
    let (_db, mut conn) = TestDb::connected();
    let a = enqueue(&mut conn, &keyed("a")).expect("first").id();
    let batch = vec![keyed("a"), keyed("b"), keyed("b"), keyed("c"), keyed("b")];
    let done = enqueue_many(&mut conn, &batch).expect("batch");
    assert_eq!(done.inserted, vec![batch[1].id(), batch[3].id()]);
    let duplicates: Vec<(JobId, &str, JobId)> = done
        .duplicates
        .iter()
        .map(|d| (d.job, d.unique_key.as_str(), d.existing))
        .collect();
    assert_eq!(
        duplicates,
        vec![
            (batch[0].id(), "a", a),
            (batch[2].id(), "b", batch[1].id()),
            (batch[4].id(), "b", batch[1].id()),
        ],
        "each names its holder: the live job, or the batch's first of the key"
    );
    assert_eq!(count_where(&mut conn, "true"), 3);

    // Single and batch agree on the same state.
    let single = enqueue(&mut conn, &keyed("c")).expect("single");
    let as_batch = enqueue_many(&mut conn, &[keyed("c")]).expect("batch of one");
    assert_eq!(single.id(), batch[3].id());
    assert_eq!(as_batch.duplicates[0].existing, batch[3].id());
    assert!(as_batch.inserted.is_empty());
}

#[test]
fn a_scheduled_or_set_aside_job_holds_its_key() {
    let (_db, mut conn) = TestDb::connected();
    let delayed = JobOptions::new()
        .unique_key("nightly")
        .delay(std::time::Duration::from_secs(3600));
    let later = put(&mut conn, "report.build", delayed);
    assert_eq!(count_where(&mut conn, "status = 'scheduled'"), 1);
    for status in ["scheduled", "unhandled"] {
        diesel::sql_query(format!("UPDATE jobqueue_jobs SET status = '{status}'"))
            .execute(&mut conn)
            .expect("set the status");
        assert_eq!(
            holder(enqueue(&mut conn, &keyed("nightly"))),
            later,
            "{status}: the holder is named"
        );
    }
}
