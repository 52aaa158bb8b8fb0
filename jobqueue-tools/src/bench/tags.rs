//! Listing by tag on a long history: the first page of a common tag, of a
//! rare tag carried by the oldest jobs alone, and of a tag no job carries,
//! against the first page of the unfiltered list, in a table of
//! `tag_rows` finished jobs of which one in [`TAGGED_EVERY`] is tagged.
//! Each page is found as `jobqueue list` finds it: window after window
//! until the page is full or the jobs run out.

use std::time::Instant;

use diesel::{Connection, PgConnection, RunQueryDsl};
use jobqueue_core::browse::{JobQuery, browse_jobs};

use super::{Row, Sizes, checkpoint, db, median, reset};
use crate::ToolError;

/// One job in this many is tagged `common`.
const TAGGED_EVERY: usize = 100;

/// Jobs tagged `rare`: the oldest of the table.
const RARE: usize = 10;

/// Jobs per page.
const PAGE: i64 = 50;

/// The first page of `query` (at most [`PAGE`] jobs), window after window:
/// the milliseconds it took, and the statements' pages (windows) read.
fn first_page(conn: &mut PgConnection, mut query: JobQuery) -> Result<(f64, usize), ToolError> {
    let started = Instant::now();
    let (mut found, mut windows) = (0, 0);
    loop {
        let page = browse_jobs(conn, &query, PAGE - found as i64)?;
        windows += 1;
        found += page.jobs.len();
        match page.next.or(page.searched_to) {
            Some(cursor) if (found as i64) < PAGE => query.cursor = Some(cursor),
            _ => break,
        }
    }
    Ok((started.elapsed().as_secs_f64() * 1000.0, windows))
}

pub(crate) fn list_by_tag(url: &str, sizes: &Sizes, runs: usize) -> Result<Vec<Row>, ToolError> {
    let mut conn = PgConnection::establish(url).map_err(db)?;
    reset(&mut conn)?;
    // Ids rise with the series, as UUIDv7 ids rise with time.
    diesel::sql_query(format!(
        "INSERT INTO jobqueue_jobs (id, job_type, queue, status, run_at, finished_at, payload, tags)
         SELECT ('00000000-0000-7000-8000-' || lpad(to_hex(g), 12, '0'))::uuid, 'bench.noop',
                'default', 'failed', now(), now(), '{{\"seq\":0}}',
                CASE WHEN g <= {RARE} THEN ARRAY['rare']
                     WHEN g % {TAGGED_EVERY} = 0 THEN ARRAY['common'] END
         FROM generate_series(1, $1) AS g"
    ))
    .bind::<diesel::sql_types::BigInt, _>(sizes.tag_rows as i64)
    .execute(&mut conn)
    .map_err(db)?;
    diesel::sql_query("VACUUM (ANALYZE) jobqueue_jobs")
        .execute(&mut conn)
        .map_err(db)?;
    checkpoint(&mut conn)?;

    let tagged = |tag: &str| JobQuery {
        tag: Some(tag.to_owned()),
        ..JobQuery::default()
    };
    let (mut plain, mut common, mut rare, mut absent) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    let mut windows = (0, 0);
    for _ in 0..runs {
        plain.push(first_page(&mut conn, JobQuery::default())?.0);
        common.push(first_page(&mut conn, tagged("common"))?.0);
        let (ms, walked) = first_page(&mut conn, tagged("rare"))?;
        rare.push(ms);
        let (ms, absent_walked) = first_page(&mut conn, tagged("absent"))?;
        absent.push(ms);
        windows = (walked, absent_walked);
    }
    let rows = sizes.tag_rows;
    let of = |values: &[f64]| -> Vec<f64> {
        values
            .iter()
            .zip(&plain)
            .map(|(value, base)| value / base)
            .collect()
    };
    let note = format!("{rows} finished jobs, 1 in {TAGGED_EVERY} tagged");
    Ok(vec![
        Row::new("list page, no filter", "ms", plain.clone()).note(note),
        Row::new("list page by tag, common / no filter", "ratio", of(&common))
            .note(format!("{:.1} ms", median(&common))),
        Row::new(
            "list page by tag, rare and oldest / no filter",
            "ratio",
            of(&rare),
        )
        .note(format!(
            "{:.1} ms; {} windows of tagged jobs; the {RARE} oldest jobs",
            median(&rare),
            windows.0
        )),
        Row::new("list page by tag, absent / no filter", "ratio", of(&absent)).note(format!(
            "{:.1} ms; {} windows of tagged jobs",
            median(&absent),
            windows.1
        )),
    ])
}
