//! Per-key concurrency's costs (`keys`). Burn-downs of one queue's no-op
//! jobs by a runner of 8 workers, four settings alternated within each
//! run: no keys (the baseline); every job keyed, 10 per key, no key limit
//! (the never-binding limit's "unlimited drain"); the same jobs under a key
//! limit of 10 (never binding: no job waits for another of its key); every
//! job keyed over many keys, a key limit of 1 (each key's jobs one after
//! another). A keyed job of a key-limited queue is admitted by its
//! enqueue when its key has room, and inserted `waiting` otherwise, to
//! reach the workers once a runner admitted it. What that costs the
//! enqueue: the keyed jobs of the never-binding setting enqueued with the
//! limit against the same jobs without it.
//!
//! The same comparison of no keys against a limit that never binds with
//! jobs that work 1 ms each (a tenth as many jobs): what a limit costs
//! jobs that do something.
//!
//! And the claim's cost with jobs waiting behind busy keys: a claim of 100
//! from an unkeyed backlog while queue `busy` (key limit 1) has one job of
//! each of its keys claimed and held, with and without a line of waiting
//! jobs behind each, run after run.

use std::time::{Duration, Instant};

use diesel::{Connection, PgConnection, RunQueryDsl};
use jobqueue_core::engine::{self, Claim};
use jobqueue_core::{Job, JobOptions, KeyLimit, NewJob};

use super::enqueue::insert;
use super::history::{BATCH, claim_latency_of};
use super::noop::{BenchNoop, BenchWork};
use super::queues::{WORKERS, backlog, burn};
use super::{Row, Sizes, checkpoint, db, reset};
use crate::ToolError;

/// The burn-downs' queue.
const QUEUE: &str = "default";
/// Jobs per key of the burn-down whose key limit does not bind, and that
/// limit.
const LOOSE_PER_KEY: usize = 10;
/// How long each job of the working burn-downs works.
const WORK_MICROS: u64 = 1000;

/// Keys of the burn-down one job per key at a time (fewer when the
/// burn-down has fewer than 5 jobs per key: quick sizes).
const SERIAL_KEYS: usize = 10_000;
/// The queue whose keys are busy in the claim-cost measurement.
const BUSY_QUEUE: &str = "busy";
/// The lease of the busy keys' held jobs: longer than any measurement.
const HELD_LEASE: Duration = Duration::from_secs(3600);
/// Most jobs the bench admits or claims in one call (a runner admits 1000
/// at a time).
const SETUP_BATCH: i64 = 1000;

/// `n` copies of `job` in `queue`, the `i`-th carrying key `k{i % keys}`
/// when `keys` is given (so each key's jobs are spread over the enqueue
/// order).
fn jobs_of<J: Job>(
    job: &J,
    n: usize,
    queue: &str,
    keys: Option<usize>,
) -> Result<Vec<NewJob>, ToolError> {
    (0..n)
        .map(|i| {
            let mut options = JobOptions::new().queue(queue);
            if let Some(keys) = keys {
                options = options.concurrency_key(format!("k{}", i % keys));
            }
            NewJob::from_job(job, options).map_err(ToolError::from)
        })
        .collect()
}

/// `n` no-op jobs of `queue` over `keys` keys (see [`jobs_of`]).
fn keyed_backlog(n: usize, queue: &str, keys: usize) -> Result<Vec<NewJob>, ToolError> {
    jobs_of(&BenchNoop { seq: 0 }, n, queue, Some(keys))
}

/// Empties the jobs table and sets `queue`'s key limit (making the queue
/// known with a job first, which the table is emptied of again).
fn reset_with_key_limit(
    conn: &mut PgConnection,
    queue: &str,
    limit: Option<KeyLimit>,
) -> Result<(), ToolError> {
    reset(conn)?;
    insert(conn, &backlog(1, queue)?)?;
    jobqueue_core::set_queue_key_limit(conn, queue, limit)?;
    reset(conn)
}

/// Inserts `jobs` and brings the table's statistics up to date (the
/// server may run without autovacuum), as for every setting compared.
fn insert_analyzed(conn: &mut PgConnection, jobs: &[NewJob]) -> Result<(), ToolError> {
    insert(conn, jobs)?;
    analyze(conn)
}

/// Brings the jobs table's statistics up to date.
fn analyze(conn: &mut PgConnection) -> Result<(), ToolError> {
    diesel::sql_query("ANALYZE jobqueue_jobs")
        .execute(conn)
        .map_err(db)?;
    Ok(())
}

/// One burn-down of `jobs` by a runner of [`WORKERS`] workers, with the
/// burn-downs' queue emptied and its key limit set to `limit` first;
/// returns jobs/s.
fn burn_with(
    conn: &mut PgConnection,
    url: &str,
    limit: Option<KeyLimit>,
    jobs: &[NewJob],
) -> Result<f64, ToolError> {
    enqueue_with(conn, limit, jobs)?;
    burn(url, jobs.len())
}

/// Empties the burn-downs' queue, sets its key limit to `limit` and
/// enqueues `jobs` (analyzed and checkpointed after, for the burn-down);
/// returns the enqueue's jobs/s.
fn enqueue_with(
    conn: &mut PgConnection,
    limit: Option<KeyLimit>,
    jobs: &[NewJob],
) -> Result<f64, ToolError> {
    reset_with_key_limit(conn, QUEUE, limit)?;
    let started = Instant::now();
    insert(conn, jobs)?;
    let rate = jobs.len() as f64 / started.elapsed().as_secs_f64();
    analyze(conn)?;
    checkpoint(conn)?;
    Ok(rate)
}

/// Keys of the one-at-a-time burn-down of `n` jobs: `SERIAL_KEYS`, or
/// fewer so that each key has at least 5 jobs.
fn serial_keys(n: usize) -> usize {
    SERIAL_KEYS.min(n / 5).max(1)
}

/// The three burn-downs, alternated within each run.
fn burn_downs(url: &str, sizes: &Sizes, runs: usize) -> Result<Vec<Row>, ToolError> {
    let mut conn = PgConnection::establish(url).map_err(db)?;
    let n = sizes.burn_jobs;
    let (loose_keys, one_keys) = ((n / LOOSE_PER_KEY).max(1), serial_keys(n));
    let loose = KeyLimit::per_key(LOOSE_PER_KEY as u32)?;
    // No keys; keyed without a limit; the same keyed jobs with a limit
    // that never binds; one per key.
    let settings = [
        (None, None),
        (None, Some(loose_keys)),
        (Some(loose), Some(loose_keys)),
        (Some(KeyLimit::per_key(1)?), Some(one_keys)),
    ];
    let mut rates: [Vec<f64>; 4] = Default::default();
    let mut enqueues: [Vec<f64>; 4] = Default::default();
    let result = (|| {
        for _ in 0..runs {
            for (i, (limit, keys)) in settings.iter().enumerate() {
                let jobs = jobs_of(&BenchNoop { seq: 0 }, n, QUEUE, *keys)?;
                enqueues[i].push(enqueue_with(&mut conn, *limit, &jobs)?);
                rates[i].push(burn(url, jobs.len())?);
            }
        }
        Ok::<_, ToolError>(())
    })();
    reset_with_key_limit(&mut conn, QUEUE, None)?;
    result?;
    let ratios = |of: &[f64], to: &[f64]| of.iter().zip(to).map(|(a, b)| a / b).collect();
    let [plain, keyed, limited, one] = &rates;
    Ok(vec![
        Row::new(
            format!("burn-down, {WORKERS} workers, {n} jobs, no keys"),
            "jobs/s",
            plain.clone(),
        ),
        Row::new(
            format!("burn-down, {n} jobs over {loose_keys} keys, no key limit"),
            "jobs/s",
            keyed.clone(),
        ),
        Row::new(
            format!("burn-down, {n} jobs over {loose_keys} keys, key limit {LOOSE_PER_KEY}"),
            "jobs/s",
            limited.clone(),
        )
        .note(format!(
            "{LOOSE_PER_KEY} jobs per key: the limit never binds"
        )),
        Row::new(
            "burn-down, key limit not binding / the same keyed jobs unlimited",
            "ratio",
            ratios(limited, keyed),
        )
        .note("same run, alternated; target ≥ 0.95"),
        Row::new(
            "burn-down, key limit not binding / no keys",
            "ratio",
            ratios(limited, plain),
        )
        .note("same run, alternated: the keys' own cost too (their index)"),
        Row::new(
            "enqueue of those keyed jobs, limit 10 / no limit",
            "ratio",
            ratios(&enqueues[2], &enqueues[1]),
        )
        .note("jobs/s; each enqueue admits its jobs: key locks tried, holders counted"),
        Row::new(
            format!("burn-down, {n} jobs over {one_keys} keys, key limit 1"),
            "jobs/s",
            one.clone(),
        )
        .note(format!(
            "{} jobs per key, one at a time{}",
            n / one_keys,
            if one_keys < SERIAL_KEYS {
                format!(" (keys scaled down from {SERIAL_KEYS}: quick size)")
            } else {
                String::new()
            }
        )),
        Row::new(
            "burn-down, key limit 1 / no keys",
            "ratio",
            ratios(one, plain),
        )
        .note("same run, alternated; target ≥ 0.5"),
    ])
}

/// Burn-downs of jobs that work 1 ms each, a tenth of the no-op ones'
/// number: no keys against a key limit that never binds (10 jobs per key,
/// a limit of 10), alternated within each run.
fn working_burn_downs(url: &str, sizes: &Sizes, runs: usize) -> Result<Vec<Row>, ToolError> {
    let mut conn = PgConnection::establish(url).map_err(db)?;
    let n = (sizes.burn_jobs / 10).max(LOOSE_PER_KEY);
    let keys = n / LOOSE_PER_KEY;
    let (mut plain, mut ratios) = (Vec::new(), Vec::new());
    let result = (|| {
        for _ in 0..runs {
            let mut rates = [0.0; 2];
            let settings = [None, Some(KeyLimit::per_key(LOOSE_PER_KEY as u32)?)];
            for (i, limit) in settings.into_iter().enumerate() {
                let work = BenchWork {
                    seq: 0,
                    micros: WORK_MICROS,
                };
                let jobs = jobs_of(&work, n, QUEUE, limit.map(|_| keys))?;
                rates[i] = burn_with(&mut conn, url, limit, &jobs)?;
            }
            plain.push(rates[0]);
            ratios.push(rates[1] / rates[0]);
        }
        Ok::<_, ToolError>(())
    })();
    reset_with_key_limit(&mut conn, QUEUE, None)?;
    result?;
    Ok(vec![
        Row::new(
            format!("burn-down, {WORKERS} workers, {n} jobs of 1 ms, no keys"),
            "jobs/s",
            plain,
        ),
        Row::new(
            "burn-down of 1 ms jobs, key limit not binding / no keys",
            "ratio",
            ratios,
        )
        .note(format!(
            "{keys} keys of {LOOSE_PER_KEY} jobs, limit {LOOSE_PER_KEY}; same run, alternated"
        )),
    ])
}

/// Fills queue `busy` (key limit 1): `keys` keys each with one job
/// admitted, claimed and held by a worker that never finishes it, and
/// `waiting` jobs of each key behind it.
fn busy_keys(conn: &mut PgConnection, keys: usize, waiting: usize) -> Result<(), ToolError> {
    reset_with_key_limit(conn, BUSY_QUEUE, Some(KeyLimit::per_key(1)?))?;
    // Each job is its key's first: its enqueue admits it, or an admission
    // pass does (an enqueue that did not get its key's lock).
    insert(conn, &keyed_backlog(keys, BUSY_QUEUE, keys)?)?;
    let busy = [BUSY_QUEUE.to_owned()];
    loop {
        let page = engine::admit_new(conn, &busy, None, SETUP_BATCH)?;
        if page.looked == 0 {
            break;
        }
    }
    let admitted = super::count(conn, "status = 'pending'")?;
    let holder = Claim::new("bench-keys-holder")
        .queues([BUSY_QUEUE])
        .limit(SETUP_BATCH)
        .lease(HELD_LEASE);
    let mut held = 0;
    while held < keys {
        let claimed = engine::claim(conn, &holder)?.len();
        if claimed == 0 {
            break;
        }
        held += claimed;
    }
    if admitted != keys as i64 || held != keys {
        return Err(ToolError::Usage(format!(
            "keys: {admitted} of {keys} busy keys' first jobs admitted, {held} held"
        )));
    }
    insert_analyzed(conn, &keyed_backlog(keys * waiting, BUSY_QUEUE, keys)?)?;
    // As a runner leaves them: looked at by an admission, and waiting.
    loop {
        let page = engine::admit_new(conn, &busy, None, SETUP_BATCH)?;
        let (now, looked) = (page.admitted, page.looked);
        if now > 0 {
            return Err(ToolError::Usage(format!(
                "keys: {now} jobs behind busy keys were admitted"
            )));
        }
        if looked == 0 {
            return Ok(());
        }
    }
}

/// The claim's cost with `busy_keys` × `busy_waiting` jobs waiting behind
/// busy keys against the same busy keys with none waiting, alternated.
fn claim_cost(url: &str, sizes: &Sizes, runs: usize) -> Result<Vec<Row>, ToolError> {
    let mut conn = PgConnection::establish(url).map_err(db)?;
    let (keys, behind) = (sizes.key_busy_keys, sizes.key_busy_waiting);
    let waiting = keys * behind;
    let claims = [
        (
            "from queue default",
            Claim::new("bench-keys").limit(BATCH).queues([QUEUE]),
        ),
        ("of every queue", Claim::new("bench-keys").limit(BATCH)),
    ];
    let mut alone = vec![Vec::new(); claims.len()];
    let mut ratios = vec![Vec::new(); claims.len()];
    let result = (|| {
        for _ in 0..runs {
            for (i, (_, claim)) in claims.iter().enumerate() {
                busy_keys(&mut conn, keys, 0)?;
                let base = claim_latency_of(url, sizes.history_claims, QUEUE, claim)?;
                busy_keys(&mut conn, keys, behind)?;
                let loaded = claim_latency_of(url, sizes.history_claims, QUEUE, claim)?;
                alone[i].push(base);
                ratios[i].push(loaded / base);
            }
        }
        Ok::<_, ToolError>(())
    })();
    reset_with_key_limit(&mut conn, BUSY_QUEUE, None)?;
    result?;
    let mut rows = Vec::new();
    for (((name, _), alone), ratios) in claims.iter().zip(alone).zip(ratios) {
        rows.push(
            Row::new(
                format!("claim {BATCH} {name}, {keys} busy keys (median)"),
                "ms",
                alone,
            )
            .note("queue busy: key limit 1, one job of each key held, none waiting"),
        );
        rows.push(
            Row::new(
                format!("claim {BATCH} {name}, {waiting} waiting / none"),
                "ratio",
                ratios,
            )
            .note(format!(
                "{behind} jobs waiting behind each busy key; same run, alternated; target ≤ 1.5"
            )),
        );
    }
    Ok(rows)
}

/// The `keys` measurement's rows.
pub(crate) fn measure(url: &str, sizes: &Sizes, runs: usize) -> Result<Vec<Row>, ToolError> {
    let mut rows = burn_downs(url, sizes, runs)?;
    rows.extend(working_burn_downs(url, sizes, runs)?);
    rows.extend(claim_cost(url, sizes, runs)?);
    Ok(rows)
}
