//! The bare-SQL queue (`bare`): a job queue as an application would write
//! one by hand, with none of jobqueue's statements, tables or features: a
//! table of its own (an id, a queue, a JSON payload, a due time, a
//! status), a partial index on its due jobs, a claim of 100 with
//! `FOR UPDATE SKIP LOCKED` and a delete on completion, both prepared once
//! per connection, from 8 connections at once. The floor jobqueue's
//! burn-down is held against: what the same server does for the same
//! no-op jobs with nothing between.

use diesel::connection::SimpleConnection;
use diesel::sql_types::BigInt;
use diesel::{Connection, PgConnection, RunQueryDsl};

use super::burn::at_once;
use super::{Row, Sizes, db};
use crate::ToolError;

/// The table, its index, and the two statements, prepared per connection.
const SCHEMA: &str = "
    CREATE TABLE IF NOT EXISTS bench_bare_jobs (
        id bigserial PRIMARY KEY,
        queue text NOT NULL DEFAULT 'default',
        payload jsonb NOT NULL,
        run_at timestamptz NOT NULL DEFAULT now(),
        status text NOT NULL DEFAULT 'pending',
        attempts int NOT NULL DEFAULT 0
    );
    CREATE INDEX IF NOT EXISTS bench_bare_jobs_due
        ON bench_bare_jobs (queue, run_at, id) WHERE status = 'pending';";

const PREPARE: &str = "
    PREPARE bare_claim(int8) AS
        UPDATE bench_bare_jobs SET status = 'running', attempts = attempts + 1
        WHERE id IN (
            SELECT id FROM bench_bare_jobs
            WHERE queue = 'default' AND status = 'pending' AND run_at <= now()
            ORDER BY run_at, id
            LIMIT $1
            FOR UPDATE SKIP LOCKED)
        RETURNING id, payload;
    PREPARE bare_done(int8[]) AS DELETE FROM bench_bare_jobs WHERE id = ANY($1);";

#[derive(diesel::QueryableByName)]
struct Claimed {
    #[diesel(sql_type = BigInt)]
    id: i64,
}

/// Empties the table (made if missing) and fills it with `n` due jobs of
/// the no-op job's payload.
fn fill(conn: &mut PgConnection, n: usize) -> Result<(), ToolError> {
    conn.batch_execute(&format!(
        "{SCHEMA}
         TRUNCATE bench_bare_jobs;
         INSERT INTO bench_bare_jobs (payload)
         SELECT jsonb_build_object('seq', i) FROM generate_series(1, {n}) AS i;"
    ))
    .map_err(db)?;
    // A statement of its own: VACUUM runs outside a transaction.
    conn.batch_execute("VACUUM (ANALYZE) bench_bare_jobs")
        .map_err(db)
}

/// A connection with the bare queue's statements prepared.
fn connect(url: &str) -> Result<PgConnection, ToolError> {
    let mut conn = PgConnection::establish(url).map_err(db)?;
    conn.batch_execute(PREPARE).map_err(db)?;
    Ok(conn)
}

/// One connection's loop: claim a batch, delete it, until none is left.
fn work(mut conn: PgConnection, batch: i64) -> Result<(), ToolError> {
    loop {
        // EXECUTE takes no protocol parameters: its arguments are
        // literals (numbers this loop made, nothing quoted).
        let claimed: Vec<Claimed> = diesel::sql_query(format!("EXECUTE bare_claim({batch})"))
            .load(&mut conn)
            .map_err(db)?;
        if claimed.is_empty() {
            return Ok(());
        }
        let ids: Vec<String> = claimed.iter().map(|row| row.id.to_string()).collect();
        diesel::sql_query(format!("EXECUTE bare_done('{{{}}}')", ids.join(",")))
            .execute(&mut conn)
            .map_err(db)?;
    }
}

/// The bare-SQL queue's burn-down of `sizes.burn_jobs` jobs from
/// `sizes.floor_threads` connections: jobs/s per run.
pub(crate) fn burn_down(url: &str, sizes: &Sizes, runs: usize) -> Result<Row, ToolError> {
    let mut conn = PgConnection::establish(url).map_err(db)?;
    let n = sizes.burn_jobs;
    let mut rates = Vec::new();
    let result = (|| {
        for _ in 0..runs {
            fill(&mut conn, n)?;
            let (url, batch) = (url.to_owned(), sizes.floor_batch);
            let took = at_once(
                sizes.floor_threads,
                move |_| connect(&url),
                move |conn| work(conn, batch),
            )?;
            rates.push(n as f64 / took.as_secs_f64());
        }
        Ok::<_, ToolError>(())
    })();
    conn.batch_execute("DROP TABLE IF EXISTS bench_bare_jobs")
        .map_err(db)?;
    result?;
    Ok(Row::new(
        format!(
            "bare-SQL queue of an application's own, {} conns, batches of {}",
            sizes.floor_threads, sizes.floor_batch
        ),
        "jobs/s",
        rates,
    )
    .note("its own table and statements: claim SKIP LOCKED, delete when done"))
}
