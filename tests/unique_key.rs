//! At most one live job per unique key; finished jobs do not block. A clash
//! is refused with the holder's id and leaves the caller's transaction usable.

use diesel::prelude::*;
use jobqueue_core::{Claim, Error, JobOptions, NewJob, claim, complete, enqueue, enqueue_many};
use jobqueue_tests::{TestDb, count_where, put};

fn keyed(key: &str) -> NewJob {
    NewJob::new("report.build", "{}", JobOptions::new().unique_key(key)).expect("valid")
}

#[test]
fn second_live_job_is_refused_with_the_holder() {
    let db = TestDb::new();
    let mut conn = db.conn();
    let first = enqueue(&mut conn, &keyed("report:42")).expect("first");
    match enqueue(&mut conn, &keyed("report:42")) {
        Err(Error::UniqueConflict {
            unique_key,
            existing,
        }) => {
            assert_eq!(unique_key, "report:42");
            assert_eq!(existing, Some(first));
        }
        other => panic!("expected a unique conflict, got {other:?}"),
    }
    // Still refused while the holder is claimed (live).
    let held = claim(&mut conn, &Claim::new("w")).expect("claim");
    assert!(matches!(
        enqueue(&mut conn, &keyed("report:42")),
        Err(Error::UniqueConflict { .. })
    ));
    // Once it finished, the key is free again.
    complete(&mut conn, &held[0].lease()).expect("complete");
    let again = enqueue(&mut conn, &keyed("report:42")).expect("after finish");
    assert_ne!(again, first);
    assert_eq!(count_where(&mut conn, "unique_key = 'report:42'"), 2);
    // Other keys and keyless jobs are unaffected.
    enqueue(&mut conn, &keyed("report:43")).expect("other key");
    enqueue(
        &mut conn,
        &NewJob::new("report.build", "{}", JobOptions::new()).expect("valid"),
    )
    .expect("no key");
    enqueue(
        &mut conn,
        &NewJob::new("report.build", "{}", JobOptions::new()).expect("valid"),
    )
    .expect("no key");
}

#[test]
fn a_clash_does_not_abort_the_callers_transaction() {
    let db = TestDb::new();
    let mut conn = db.conn();
    enqueue(&mut conn, &keyed("k")).expect("first");
    conn.transaction::<_, Error, _>(|conn| {
        assert!(matches!(
            enqueue(conn, &keyed("k")),
            Err(Error::UniqueConflict { .. })
        ));
        // The transaction goes on: this insert commits with it.
        enqueue(conn, &keyed("k2"))?;
        Ok(())
    })
    .expect("transaction commits");
    assert_eq!(count_where(&mut conn, "unique_key IN ('k', 'k2')"), 2);
}

#[test]
fn batch_skips_held_and_repeated_keys() {
    let db = TestDb::new();
    let mut conn = db.conn();
    enqueue(&mut conn, &keyed("a")).expect("first");
    let batch = vec![keyed("a"), keyed("b"), keyed("b"), keyed("c")];
    let done = enqueue_many(&mut conn, &batch).expect("batch");
    assert_eq!(done.inserted, vec![batch[1].id(), batch[3].id()]);
    assert_eq!(done.skipped, vec![batch[0].id(), batch[2].id()]);
    assert_eq!(count_where(&mut conn, "true"), 3);
}

#[test]
fn a_scheduled_or_set_aside_job_holds_its_key() {
    let db = TestDb::new();
    let mut conn = db.conn();
    let delayed = JobOptions::new()
        .unique_key("nightly")
        .delay(std::time::Duration::from_secs(3600));
    let later = put(&mut conn, "report.build", delayed);
    assert_eq!(count_where(&mut conn, "status = 'scheduled'"), 1);
    for status in ["scheduled", "unhandled"] {
        diesel::sql_query(format!("UPDATE jobqueue_jobs SET status = '{status}'"))
            .execute(&mut conn)
            .expect("set the status");
        match enqueue(&mut conn, &keyed("nightly")) {
            Err(Error::UniqueConflict { existing, .. }) => {
                assert_eq!(existing, Some(later), "{status}: the holder is named")
            }
            other => panic!("{status}: expected a unique conflict, got {other:?}"),
        }
    }
}
