//! Whether the live runners cover the jobs: held jobs past their lease
//! with nobody to recover them, waiting jobs of types no live runner
//! handles, queues with due jobs that no live runner works.

use std::collections::BTreeMap;

use diesel::prelude::*;
use diesel::sql_types::{BigInt, Bool, Double, Nullable, Text};

use super::{Check, CheckStatus, format, read};
use crate::{Result, RunnerRow, sql};

/// The name of the `held leases` check.
pub(super) const HELD_LEASES: &str = "held leases";

/// The name of the `job types` check.
pub(super) const JOB_TYPES: &str = "job types";

/// The name of the `queues` check.
pub(super) const QUEUES: &str = "queues";

#[derive(QueryableByName)]
struct Held {
    #[diesel(sql_type = Nullable<Text>)]
    worker_id: Option<String>,
    #[diesel(sql_type = BigInt)]
    held: i64,
    #[diesel(sql_type = BigInt)]
    expired: i64,
    #[diesel(sql_type = Double)]
    expired_secs: f64,
    #[diesel(sql_type = Double)]
    lease_left_secs: f64,
}

/// `held leases`: held jobs past their lease. Any live runner's reaper
/// recovers them (back to pending, or failed on their last attempt); with
/// no live runner they stay held. Jobs of a runner that is gone but whose
/// lease still runs wait for it to end.
pub(super) fn held_leases(
    conn: &mut PgConnection,
    runners: &[RunnerRow],
    live: &[&RunnerRow],
) -> Result<Check> {
    let held = read(conn, |conn| {
        Ok(diesel::sql_query(sql::DOCTOR_HELD).load::<Held>(conn)?)
    })?;
    let worker_state = |worker: &str| match runners.iter().find(|r| r.worker_id == worker) {
        Some(r) if r.is_gone() => {
            format!(
                "gone, last seen {} ago",
                crate::human::human_duration(r.silent_for())
            )
        }
        Some(_) => "live".to_owned(),
        None => "not a registered runner".to_owned(),
    };
    let is_gone = |worker: &str| runners.iter().any(|r| r.worker_id == worker && r.is_gone());
    let total: i64 = held.iter().map(|h| h.held).sum();
    let expired: Vec<String> = held
        .iter()
        .filter(|h| h.expired > 0)
        .map(|h| {
            let worker = h.worker_id.as_deref().unwrap_or("?");
            format!(
                "{} job(s) of {worker} ({}), lease expired {} ago",
                h.expired,
                worker_state(worker),
                crate::human::human_duration(format::secs(h.expired_secs))
            )
        })
        .collect();
    let expired_jobs: i64 = held.iter().map(|h| h.expired).sum();
    if expired_jobs > 0 {
        let evidence = format!(
            "{expired_jobs} held job(s) past their lease: {}",
            format::list(&expired, 3)
        );
        return Ok(if live.is_empty() {
            Check::graded(
                HELD_LEASES,
                CheckStatus::Fail,
                format!("{evidence}; no live runner to recover them"),
                "start a runner: its reaper hands them back (to pending, or to failed on their \
                 last attempt); `jobqueue runners` shows who held them",
            )
        } else {
            Check::graded(
                HELD_LEASES,
                CheckStatus::Warn,
                format!("{evidence}; the live runners' reapers recover them"),
                "if this stays, the live runners do not recover stale jobs: check their logs \
                 and their rescue interval",
            )
        });
    }
    let stranded: Vec<String> = held
        .iter()
        .filter(|h| h.worker_id.as_deref().is_some_and(is_gone))
        .map(|h| {
            let worker = h.worker_id.as_deref().unwrap_or("?");
            format!(
                "{} job(s) of {worker} ({}), lease ends in {}",
                h.held,
                worker_state(worker),
                crate::human::human_duration(format::secs(h.lease_left_secs))
            )
        })
        .collect();
    if !stranded.is_empty() {
        return Ok(Check::graded(
            HELD_LEASES,
            CheckStatus::Warn,
            format!(
                "jobs held by runners that are gone: {}",
                format::list(&stranded, 3)
            ),
            "they are recovered when their lease ends; a shorter lease recovers a dead \
             runner's jobs sooner",
        ));
    }
    Ok(Check::ok(
        HELD_LEASES,
        if total == 0 {
            "no held jobs".to_owned()
        } else {
            format!("{total} held job(s), all within their lease")
        },
    ))
}

#[derive(QueryableByName)]
struct Waiting {
    #[diesel(sql_type = Text)]
    job_type: String,
    #[diesel(sql_type = Text)]
    queue: String,
    #[diesel(sql_type = Text)]
    status: String,
    #[diesel(sql_type = BigInt)]
    jobs: i64,
}

/// Waiting jobs of one type in one queue.
#[derive(Default)]
struct Counts {
    /// Pending or unhandled.
    due: i64,
    /// Scheduled.
    scheduled: i64,
}

/// `job types`: waiting jobs (waiting on a key, scheduled, pending, unhandled) whose type no
/// live runner working their queue handles. Due ones (pending, unhandled)
/// fail; scheduled ones warn (a runner may be deployed before they are due).
pub(super) fn job_types(conn: &mut PgConnection, live: &[&RunnerRow]) -> Result<Check> {
    let waiting = read(conn, |conn| {
        Ok(diesel::sql_query(sql::DOCTOR_WAITING).load::<Waiting>(conn)?)
    })?;
    let mut pairs: BTreeMap<(&str, &str), Counts> = BTreeMap::new();
    for w in &waiting {
        let entry = pairs.entry((&w.job_type, &w.queue)).or_default();
        if w.status == "scheduled" {
            entry.scheduled += w.jobs;
        } else {
            entry.due += w.jobs;
        }
    }
    let orphans: Vec<_> = pairs
        .iter()
        .filter(|((job_type, queue), _)| !live.iter().any(|r| r.handles(queue, job_type)))
        .collect();
    if orphans.is_empty() {
        let types: std::collections::BTreeSet<&str> = pairs.keys().map(|(t, _)| *t).collect();
        return Ok(Check::ok(
            JOB_TYPES,
            if types.is_empty() {
                "no waiting jobs".to_owned()
            } else {
                format!(
                    "a live runner handles each of the {} type(s) of waiting jobs in its queue",
                    types.len()
                )
            },
        ));
    }
    let any_due = orphans.iter().any(|(_, counts)| counts.due > 0);
    let described: Vec<String> = orphans
        .iter()
        .map(|((job_type, queue), counts)| {
            let counts = match (counts.due, counts.scheduled) {
                (0, s) => format!("{s} scheduled"),
                (d, 0) => format!("{d} due"),
                (d, s) => format!("{d} due, {s} scheduled"),
            };
            format!("{job_type} in queue {queue} ({counts})")
        })
        .collect();
    Ok(Check::graded(
        JOB_TYPES,
        if any_due {
            CheckStatus::Fail
        } else {
            CheckStatus::Warn
        },
        format!("no live runner handles {}", format::list(&described, 4)),
        "start (or deploy) a runner that registers these types and works these queues \
         (`jobqueue runners` lists what each live runner handles); jobs of a type that no \
         longer exists can be cancelled (`jobqueue cancel ID`)",
    ))
}

#[derive(QueryableByName)]
struct DueQueue {
    #[diesel(sql_type = Text)]
    queue: String,
    #[diesel(sql_type = BigInt)]
    due: i64,
    #[diesel(sql_type = Double)]
    oldest_secs: f64,
    #[diesel(sql_type = Bool)]
    paused: bool,
}

/// `queues`: queues with due jobs that no live runner works (a runner
/// with no queues named works every queue). A paused queue is left out:
/// no runner claims from it anyway.
pub(super) fn queues(conn: &mut PgConnection, live: &[&RunnerRow]) -> Result<Check> {
    let due = read(conn, |conn| {
        Ok(diesel::sql_query(sql::DOCTOR_DUE_QUEUES).load::<DueQueue>(conn)?)
    })?;
    let works = |queue: &str| {
        live.iter()
            .any(|r| r.queues.is_empty() || r.queues.iter().any(|q| q == queue))
    };
    let unworked: Vec<String> = due
        .iter()
        .filter(|q| !q.paused && !works(&q.queue))
        .map(|q| {
            format!(
                "{} ({} due, oldest waiting {})",
                q.queue,
                q.due,
                crate::human::human_duration(format::secs(q.oldest_secs))
            )
        })
        .collect();
    let paused: Vec<String> = due
        .iter()
        .filter(|q| q.paused)
        .map(|q| format!("{} ({} due)", q.queue, q.due))
        .collect();
    if !unworked.is_empty() {
        return Ok(Check::graded(
            QUEUES,
            CheckStatus::Fail,
            format!(
                "no live runner works queue(s) {}",
                format::list(&unworked, 4)
            ),
            "start a runner that works them (`jobqueue work` works every queue, `--queues \
             NAME,...` only those named)",
        ));
    }
    let mut evidence = match due.len() - paused.len() {
        0 => "no due jobs in an active queue".to_owned(),
        n => format!("each of the {n} queue(s) with due jobs has a live runner"),
    };
    if !paused.is_empty() {
        evidence.push_str(&format!("; paused: {}", format::list(&paused, 4)));
    }
    Ok(Check::ok(QUEUES, evidence))
}

/// The name of the `maintenance` check.
pub(super) const MAINTENANCE: &str = "maintenance";

/// `maintenance`: live runners whose maintenance has not finished a pass
/// for `maintenance_warn` (warns) or `maintenance_fail` (fails) of the
/// options, by what each said when last seen:
/// while a pass does not end, that runner promotes no retries, rescues no
/// leases, prunes nothing and settles no workflow ends.
pub(super) fn maintenance(live: &[&RunnerRow], options: &super::DoctorOptions) -> Check {
    let mut stalled: Vec<(&RunnerRow, std::time::Duration)> = live
        .iter()
        .filter_map(|r| {
            r.maintenance_silent_for()
                .filter(|silent| *silent >= options.maintenance_warn)
                .map(|silent| (*r, silent))
        })
        .collect();
    if stalled.is_empty() {
        let reporting = live
            .iter()
            .filter(|r| r.maintenance_silent_for().is_some())
            .count();
        return Check::ok(
            MAINTENANCE,
            format!(
                "the maintenance of each of the {reporting} live runner(s) that report it \
                 finished a pass within {}",
                crate::human::human_duration(options.maintenance_warn)
            ),
        );
    }
    stalled.sort_by_key(|(_, silent)| std::cmp::Reverse(*silent));
    let status = if stalled[0].1 >= options.maintenance_fail {
        CheckStatus::Fail
    } else {
        CheckStatus::Warn
    };
    let named: Vec<String> = stalled
        .iter()
        .map(|(r, silent)| {
            format!(
                "{} ({}, pid {}): no pass finished for {}{}",
                r.worker_id,
                r.host,
                r.pid,
                crate::human::human_duration(*silent),
                r.maintenance_pass
                    .as_deref()
                    .map(|pass| format!(", in `{pass}`"))
                    .unwrap_or_default()
            )
        })
        .collect();
    Check::graded(
        MAINTENANCE,
        status,
        format!(
            "the maintenance of {} live runner(s) is stuck: {}",
            stalled.len(),
            format::list(&named, 3)
        ),
        "while a pass does not end, that runner promotes no retries, rescues no leases, \
         prunes nothing and settles no workflow ends: its log (RUST_LOG=debug) says what the \
         pass waits for; restart the runner if it stays stuck",
    )
}
