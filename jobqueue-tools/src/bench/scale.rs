//! The operator's reads at scale: `stats`, the queue gauges (`queue list`,
//! what the metrics leader computes) and `doctor`, timed on a backlog alone,
//! again once millions of finished rows sit behind it, and again with a
//! backlog ten times larger.

use std::time::Instant;

use diesel::{Connection, PgConnection, RunQueryDsl};
use jobqueue_core::engine::Claim;
use jobqueue_core::{Counting, JobOptions, NewJob};

use super::enqueue::insert;
use super::noop::BenchNoop;
use super::{Row, Sizes, db, quantile, reset};
use crate::ToolError;

/// Calls of each read per run.
const CALLS: usize = 20;

/// The queues the bench's jobs are spread over.
const QUEUES: [&str; 4] = ["default", "mail", "media", "reports"];

/// One read an operator (or the metrics leader) makes: `stats` (live and
/// failed counts by queue and by type), the queue gauges (`queue list`),
/// `doctor` (every check).
struct Read {
    name: &'static str,
    run: fn(&mut PgConnection) -> Result<(), ToolError>,
}

const READS: [Read; 3] = [
    Read {
        name: "stats",
        run: |conn| {
            jobqueue_core::list_queues(conn, Counting::Live)?;
            jobqueue_core::type_stats(conn)?;
            Ok(())
        },
    },
    Read {
        name: "queue gauges",
        run: |conn| {
            jobqueue_core::list_queues(conn, Counting::Live)?;
            Ok(())
        },
    },
    Read {
        name: "doctor",
        run: |conn| {
            jobqueue_core::doctor(conn, &jobqueue_core::DoctorOptions::default())?;
            Ok(())
        },
    },
];

/// Milliseconds of each of `CALLS` calls of `read`, sorted.
fn time(conn: &mut PgConnection, read: &Read) -> Result<Vec<f64>, ToolError> {
    let mut times = Vec::with_capacity(CALLS);
    for _ in 0..CALLS {
        let started = Instant::now();
        (read.run)(conn)?;
        times.push(started.elapsed().as_secs_f64() * 1000.0);
    }
    times.sort_by(f64::total_cmp);
    Ok(times)
}

/// The live jobs: `pending` due jobs over the queues, a hundredth as many
/// scheduled for later, and a hundredth claimed (held).
fn backlog(conn: &mut PgConnection, pending: usize) -> Result<(), ToolError> {
    let later = chrono::Utc::now() + chrono::Duration::hours(1);
    let mut jobs = Vec::with_capacity(pending + pending / 100);
    for i in 0..pending {
        let queue = QUEUES[i % QUEUES.len()];
        jobs.push(NewJob::from_job(
            &BenchNoop { seq: i as u64 },
            JobOptions::new().queue(queue),
        )?);
    }
    for i in 0..pending / 100 {
        jobs.push(NewJob::from_job(
            &BenchNoop { seq: i as u64 },
            JobOptions::new().queue("reports").run_at(later),
        )?);
    }
    insert(conn, &jobs)?;
    let held = Claim::new("bench-scale").limit((pending / 100).max(1) as i64);
    jobqueue_core::engine::claim(conn, &held)?;
    Ok(())
}

/// Adds `rows` finished jobs (98 % completed, 1 % failed, 1 % cancelled)
/// over the queues, in chunks of a million, with ids in time order as the
/// client's UUIDv7 ids are; then vacuums and analyzes, as autovacuum would
/// have long since on a table that old.
fn history(conn: &mut PgConnection, rows: usize) -> Result<(), ToolError> {
    const CHUNK: usize = 1_000_000;
    let mut done = 0;
    while done < rows {
        let n = CHUNK.min(rows - done);
        diesel::sql_query(
            "INSERT INTO jobqueue_jobs (id, job_type, queue, status, payload, attempts, claim_count,
                                        worker_id, claimed_at, started_at, finished_at, created_at,
                                        run_at, last_error)
             SELECT ('00000000-0000-7000-8000-' || lpad(to_hex(g), 12, '0'))::uuid,
                    'bench.noop',
                    (ARRAY['default', 'mail', 'media', 'reports'])[g % 4 + 1],
                    CASE g % 100 WHEN 0 THEN 'failed' WHEN 1 THEN 'cancelled' ELSE 'completed' END,
                    '{\"seq\":0}', 1, 1, 'history', t, t, t, t, t,
                    CASE g % 100 WHEN 0 THEN 'boom' END
             FROM generate_series($1::int8, $2::int8) AS g,
                  LATERAL (SELECT now() - interval '1 day' + g * interval '1 ms' AS t) AS at",
        )
        .bind::<diesel::sql_types::BigInt, _>(done as i64 + 1)
        .bind::<diesel::sql_types::BigInt, _>((done + n) as i64)
        .execute(conn)
        .map_err(db)?;
        done += n;
    }
    diesel::sql_query("VACUUM (ANALYZE) jobqueue_jobs")
        .execute(conn)
        .map_err(db)?;
    Ok(())
}

/// Each read's p95 over `CALLS` calls, once per run.
fn p95s(conn: &mut PgConnection, runs: usize) -> Result<Vec<Vec<f64>>, ToolError> {
    let mut out: Vec<Vec<f64>> = vec![Vec::new(); READS.len()];
    for _ in 0..runs {
        for (i, read) in READS.iter().enumerate() {
            out[i].push(quantile(&time(conn, read)?, 0.95));
        }
    }
    Ok(out)
}

/// The reads timed on a backlog of `sizes.scale_pending / 10` due jobs,
/// then with `sizes.scale_finished` finished rows behind it (the history's
/// cost: the ratio), then with the backlog ten times larger (the
/// backlog's cost, which the reads do pay: they count live jobs).
pub(crate) fn at_scale(url: &str, sizes: &Sizes, runs: usize) -> Result<Vec<Row>, ToolError> {
    let mut conn = PgConnection::establish(url).map_err(db)?;
    reset(&mut conn)?;
    let small = sizes.scale_pending / 10;
    backlog(&mut conn, small)?;
    diesel::sql_query("VACUUM (ANALYZE) jobqueue_jobs")
        .execute(&mut conn)
        .map_err(db)?;
    let mut empty = p95s(&mut conn, runs)?;
    let loading = Instant::now();
    history(&mut conn, sizes.scale_finished)?;
    let load_secs = loading.elapsed().as_secs_f64();
    let mut full = p95s(&mut conn, runs)?;
    let started = Instant::now();
    jobqueue_core::list_queues(&mut conn, Counting::WithHistory)?;
    let history_ms = started.elapsed().as_secs_f64() * 1000.0;
    backlog(&mut conn, sizes.scale_pending - small)?;
    diesel::sql_query("VACUUM (ANALYZE) jobqueue_jobs")
        .execute(&mut conn)
        .map_err(db)?;
    let mut large = p95s(&mut conn, runs)?;
    let pages = dashboard_pages(url, &mut conn, runs)?;

    let finished = sizes.scale_finished;
    let mut rows = Vec::new();
    for (i, read) in READS.iter().enumerate() {
        let ratios = full[i].iter().zip(&empty[i]).map(|(f, e)| f / e).collect();
        rows.push(Row::new(
            format!("{} p95, {small} due, no history", read.name),
            "ms",
            std::mem::take(&mut empty[i]),
        ));
        rows.push(
            Row::new(
                format!("{} p95, {small} due, {finished} finished", read.name),
                "ms",
                std::mem::take(&mut full[i]),
            )
            .note("target < 50 ms"),
        );
        rows.push(Row::new(
            format!("{} p95, with history / without", read.name),
            "ratio",
            ratios,
        ));
        rows.push(
            Row::new(
                format!(
                    "{} p95, {} due, {finished} finished",
                    read.name, sizes.scale_pending
                ),
                "ms",
                std::mem::take(&mut large[i]),
            )
            .note("the backlog's cost: live jobs are counted"),
        );
    }
    rows.push(
        Row::new(
            format!("stats --history, {finished} finished"),
            "ms",
            vec![history_ms],
        )
        .note(format!(
            "one call: what stats cost before; loading the history took {load_secs:.0} s"
        )),
    );
    rows.extend(pages);
    reset(&mut conn)?;
    Ok(rows)
}

/// The dashboard's pages, each answered `CALLS` times per run by
/// `Dashboard::handle` (database reads and rendering; no HTTP transport):
/// one row of p95s per page.
fn dashboard_pages(url: &str, conn: &mut PgConnection, runs: usize) -> Result<Vec<Row>, ToolError> {
    use jobqueue_dashboard::{Dashboard, DashboardConfig, Method, Request};
    let dashboard = Dashboard::new(DashboardConfig::new(url))
        .map_err(|e| ToolError::Usage(format!("dashboard: {e}")))?;
    let failed = jobqueue_core::browse::browse_jobs(
        conn,
        &jobqueue_core::browse::JobQuery {
            status: Some(jobqueue_core::JobStatus::Failed),
            ..Default::default()
        },
        1,
    )?;
    let one = failed
        .jobs
        .first()
        .map(|job| job.id.to_string())
        .unwrap_or_default();
    let paths = [
        "/".to_owned(),
        "/jobs".to_owned(),
        "/jobs?status=pending".to_owned(),
        "/jobs?status=pending&order=run_at".to_owned(),
        "/jobs?status=completed&queue=mail".to_owned(),
        "/jobs?type=bench.noop".to_owned(),
        "/jobs?key=no-such-key".to_owned(),
        format!("/jobs/{one}"),
        "/failed".to_owned(),
        "/failed?queue=mail".to_owned(),
        "/failed/retry?queue=mail".to_owned(),
        "/schedules".to_owned(),
    ];
    let mut rows = Vec::new();
    for path in &paths {
        let mut request = Request::new(Method::Get, path.clone());
        request.host = Some("localhost".to_owned());
        let mut p95 = Vec::new();
        for _ in 0..runs {
            let mut times = Vec::with_capacity(CALLS);
            for _ in 0..CALLS {
                let started = Instant::now();
                let response = dashboard.handle(&request);
                times.push(started.elapsed().as_secs_f64() * 1000.0);
                if response.status != 200 {
                    return Err(ToolError::Usage(format!(
                        "dashboard page {path} answered {}",
                        response.status
                    )));
                }
            }
            times.sort_by(f64::total_cmp);
            p95.push(quantile(&times, 0.95));
        }
        let shown = if path.starts_with("/jobs/") {
            "/jobs/ID"
        } else {
            path
        };
        rows.push(Row::new(format!("dashboard {shown} p95"), "ms", p95).note("target < 250 ms"));
    }
    Ok(rows)
}
