//! The claim is served by the partial index on pending rows, however many
//! finished rows the table holds.

use diesel::prelude::*;
use jobqueue_core::{Claim, explain_claim};
use jobqueue_tests::{TestDb, count_where};

#[test]
fn claim_uses_the_pending_index_with_100k_finished_rows() {
    let db = TestDb::new();
    let mut conn = db.conn();
    diesel::sql_query(
        "INSERT INTO jobqueue_jobs (id, job_type, status, payload, attempts, finished_at, created_at)
         SELECT gen_random_uuid(), 'done.job', 'completed', '{}', 1,
                now() - g * interval '1 second', now() - g * interval '1 second'
         FROM generate_series(1, 100000) AS g",
    )
    .execute(&mut conn)
    .expect("insert finished rows");
    diesel::sql_query(
        "INSERT INTO jobqueue_jobs (id, job_type, payload, priority)
         SELECT gen_random_uuid(), 'live.job', '{}', g % 10 FROM generate_series(1, 50) AS g",
    )
    .execute(&mut conn)
    .expect("insert pending rows");
    diesel::sql_query("ANALYZE jobqueue_jobs")
        .execute(&mut conn)
        .expect("analyze");
    assert_eq!(count_where(&mut conn, "status = 'completed'"), 100_000);

    for request in [
        Claim::new("w").limit(100),
        Claim::new("w")
            .limit(10)
            .queues(["default"])
            .job_types(["live.job"]),
    ] {
        let plan = explain_claim(&mut conn, &request).expect("explain");
        assert!(
            plan.contains("jobqueue_jobs_fetch_idx"),
            "claim plan does not use the pending index:\n{plan}"
        );
        assert!(
            !plan.contains("Seq Scan"),
            "claim plan scans the table:\n{plan}"
        );
    }
}
