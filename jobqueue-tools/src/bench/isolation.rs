//! Claim cost against other queues' backlogs: a claim of 100 from queue
//! `q1` with a million rows of one kind in the table, against the same
//! claim with `q1`'s jobs alone. Kinds: `q1` jobs scheduled tomorrow (at the
//! same and at a higher priority), due jobs of another queue, and jobs of a
//! type no runner handles (as a runner leaves them: set aside as
//! `unhandled`).

use diesel::{Connection, PgConnection, RunQueryDsl};

use super::history::{BATCH, claim_latency};
use super::{Row, Sizes, db, reset};
use crate::ToolError;

/// The kinds of rows in the way: a name, and the columns that make it.
const KINDS: [(&str, &str); 4] = [
    (
        "q1 jobs scheduled tomorrow, same priority",
        "'q1', 'scheduled', 100, now() + interval '1 day'",
    ),
    (
        "q1 jobs scheduled tomorrow, higher priority",
        "'q1', 'scheduled', 900, now() + interval '1 day'",
    ),
    ("due jobs in another queue", "'q0', 'pending', 100, now()"),
    (
        "jobs of a type no runner handles",
        "'q1', 'unhandled', 100, now()",
    ),
];

pub(crate) fn claim_isolation(
    url: &str,
    sizes: &Sizes,
    runs: usize,
) -> Result<Vec<Row>, ToolError> {
    let mut conn = PgConnection::establish(url).map_err(db)?;
    let mut alone = Vec::new();
    let mut ratios = vec![Vec::new(); KINDS.len()];
    for _ in 0..runs {
        reset(&mut conn)?;
        let base = claim_latency(url, sizes.history_claims, "q1")?;
        alone.push(base);
        for (kind, (_, columns)) in KINDS.iter().enumerate() {
            reset(&mut conn)?;
            let job_type = if kind == 3 {
                "bench.unknown"
            } else {
                "bench.noop"
            };
            diesel::sql_query(format!(
                "INSERT INTO jobqueue_jobs (id, job_type, queue, status, priority, run_at, payload)
                 SELECT gen_random_uuid(), '{job_type}', {columns}, '{{\"seq\":0}}'
                 FROM generate_series(1, $1)"
            ))
            .bind::<diesel::sql_types::Integer, _>(sizes.history_rows as i32)
            .execute(&mut conn)
            .map_err(db)?;
            ratios[kind].push(claim_latency(url, sizes.history_claims, "q1")? / base);
        }
    }
    let mut rows = vec![Row::new(
        format!("claim {BATCH} from q1, q1 alone (median of claims)"),
        "ms",
        alone,
    )];
    for ((name, _), values) in KINDS.iter().zip(ratios) {
        rows.push(
            Row::new(
                format!("claim cost with {} {name} / alone", sizes.history_rows),
                "ratio",
                values,
            )
            .note("target ≤ 1.5"),
        );
    }
    Ok(rows)
}
