//! The jobs table itself: its dead row versions, the size of the fetch
//! index against the due jobs it serves, and whether the claim reads
//! through that index.

use diesel::prelude::*;
use diesel::sql_types::{BigInt, Bool, Double, Nullable};

use super::{Check, CheckStatus, DoctorOptions, format, grade, read, read_as_runner};
use crate::claim::Claim;
use crate::plan::HotStatement;
use crate::{Result, sql};

/// The name of the `dead tuples` check.
pub(super) const DEAD_TUPLES: &str = "dead tuples";

/// The name of the `fetch index` check.
pub(super) const FETCH_INDEX_CHECK: &str = "fetch index";

/// The name of the `claim plan` check.
pub(super) const CLAIM_PLAN: &str = "claim plan";

/// The index every claim reads.
const FETCH_INDEX: &str = "jobqueue_jobs_fetch_idx";

/// Bytes an entry of the fetch index takes when the index is packed (its
/// key, tuple header and line pointer, at the default leaf fill factor),
/// with a short queue name.
const PACKED_ENTRY_BYTES: f64 = 64.0;

/// The metapage and the root of an empty B-tree.
const EMPTY_INDEX_BYTES: f64 = 2.0 * 8192.0;

#[derive(QueryableByName)]
struct TableStats {
    #[diesel(sql_type = BigInt)]
    live: i64,
    #[diesel(sql_type = BigInt)]
    dead: i64,
    #[diesel(sql_type = Nullable<Double>)]
    vacuum_secs: Option<f64>,
    #[diesel(sql_type = Nullable<Double>)]
    autovacuum_secs: Option<f64>,
    #[diesel(sql_type = Bool)]
    server_autovacuum: bool,
    #[diesel(sql_type = Bool)]
    table_autovacuum: bool,
}

/// `dead tuples`: dead row versions of `jobqueue_jobs` by the statistics
/// views, and its last vacuum.
pub(super) fn dead_tuples(conn: &mut PgConnection, options: &DoctorOptions) -> Result<Check> {
    let stats = read(conn, |conn| {
        Ok(diesel::sql_query(sql::DOCTOR_TABLE_STATS)
            .get_result::<TableStats>(conn)
            .optional()?)
    })?;
    let Some(stats) = stats else {
        return Ok(Check::ok(DEAD_TUPLES, "no statistics on jobqueue_jobs yet"));
    };
    let (live, dead) = (stats.live.max(0), stats.dead.max(0));
    let total = live + dead;
    let fraction = if total == 0 {
        0.0
    } else {
        dead as f64 / total as f64
    };
    let status = if u64::try_from(dead).unwrap_or(0) < options.dead_min {
        CheckStatus::Ok
    } else {
        grade(fraction, options.dead_warn, options.dead_fail)
    };
    let last = match (stats.vacuum_secs, stats.autovacuum_secs) {
        (None, None) => "never vacuumed".to_owned(),
        (manual, auto) => {
            let (secs, by) = match (manual, auto) {
                (Some(m), Some(a)) if a <= m => (a, "autovacuum"),
                (Some(m), _) => (m, "VACUUM"),
                (None, Some(a)) => (a, "autovacuum"),
                (None, None) => (0.0, ""),
            };
            format!(
                "last vacuum {} ago ({by})",
                crate::human::human_duration(format::secs(secs))
            )
        }
    };
    let mut evidence = format!(
        "{dead} dead of {total} row versions in jobqueue_jobs ({}); {last}",
        format::percent(fraction)
    );
    if !stats.server_autovacuum {
        evidence.push_str("; autovacuum is off on this server");
    } else if !stats.table_autovacuum {
        evidence.push_str("; autovacuum is off for this table");
    }
    let advice = match (stats.server_autovacuum, stats.table_autovacuum) {
        (false, _) => {
            "VACUUM jobqueue_jobs now, and turn autovacuum on (autovacuum = on in \
             postgresql.conf): nothing else removes the versions every claim and completion \
             leaves behind"
        }
        (true, false) => {
            "VACUUM jobqueue_jobs now, and let autovacuum visit it again: ALTER TABLE \
             jobqueue_jobs RESET (autovacuum_enabled)"
        }
        (true, true) => {
            "VACUUM jobqueue_jobs; if the dead versions stay, something holds back the xmin \
             horizon (see vacuum horizon, replication slots, prepared xacts); if autovacuum \
             comes too seldom, ALTER TABLE jobqueue_jobs SET (autovacuum_vacuum_scale_factor \
             = 0.02)"
        }
    };
    Ok(Check::graded(DEAD_TUPLES, status, evidence, advice))
}

#[derive(QueryableByName)]
struct FetchIndex {
    #[diesel(sql_type = Bool)]
    valid: bool,
    #[diesel(sql_type = BigInt)]
    bytes: i64,
}

#[derive(QueryableByName)]
struct Estimate {
    #[diesel(sql_type = diesel::sql_types::Double)]
    rows: f64,
}

#[derive(QueryableByName)]
struct Count {
    #[diesel(sql_type = BigInt)]
    n: i64,
}

/// `fetch index`: `jobqueue_jobs_fetch_idx` exists and is valid, and its
/// size against its live entries (the due jobs, counted through it).
pub(super) fn fetch_index(conn: &mut PgConnection, options: &DoctorOptions) -> Result<Check> {
    let found = read(conn, |conn| {
        let index = diesel::sql_query(sql::DOCTOR_FETCH_INDEX)
            .get_result::<FetchIndex>(conn)
            .optional()?;
        // Counted only through the index: without it, a count would read
        // the whole table.
        let pending = match &index {
            Some(index) if index.valid => Some(
                diesel::sql_query(sql::DOCTOR_COUNT_PENDING)
                    .get_result::<Count>(conn)?
                    .n,
            ),
            _ => None,
        };
        Ok((index, pending))
    })?;
    let recreate = format!("recreate it: {}", sql::DOCTOR_FETCH_INDEX_DEFINITION);
    let (index, pending) = match found {
        (None, _) => {
            return Ok(Check::graded(
                FETCH_INDEX_CHECK,
                CheckStatus::Fail,
                format!("{FETCH_INDEX} is missing: every claim reads the whole table"),
                recreate,
            ));
        }
        (Some(index), Some(pending)) => (index, pending),
        (Some(_), None) => {
            return Ok(Check::graded(
                FETCH_INDEX_CHECK,
                CheckStatus::Fail,
                format!(
                    "{FETCH_INDEX} is invalid (a CREATE INDEX CONCURRENTLY that did not \
                     finish): the claim cannot use it"
                ),
                format!("DROP INDEX CONCURRENTLY {FETCH_INDEX}, then {recreate}"),
            ));
        }
    };
    let bytes = index.bytes as f64;
    let packed = pending.max(0) as f64 * PACKED_ENTRY_BYTES + EMPTY_INDEX_BYTES;
    let bloat = bytes / packed;
    let status = if index.bytes >= i64::try_from(options.index_min_bytes).unwrap_or(i64::MAX)
        && bloat >= options.index_bloat_warn
    {
        CheckStatus::Warn
    } else {
        CheckStatus::Ok
    };
    let mut evidence = format!(
        "{FETCH_INDEX} {} for {pending} pending jobs",
        format::bytes(bytes)
    );
    if bloat >= 2.0 {
        evidence.push_str(&format!(" (~{bloat:.0}x the size of a packed index)"));
    }
    Ok(Check::graded(
        FETCH_INDEX_CHECK,
        status,
        evidence,
        format!(
            "rebuild it without stopping the claim: REINDEX INDEX CONCURRENTLY {FETCH_INDEX} (a \
             drained backlog leaves its pages behind, and dead entries stay until VACUUM; the \
             claim steps over both)"
        ),
    ))
}

/// `claim plan`: both claim statements (of every queue, and of named
/// queues) run under `EXPLAIN ANALYZE` with the runners' session settings,
/// rolled back; each must read the jobs through the fetch index, and none
/// may scan the whole table. A table its statistics call empty is the
/// exception: there any plan costs nothing, the planner picks one of them,
/// and it plans again once rows arrive (`tests/it/plans.rs` checks that state
/// with a backlog).
pub(super) fn claim_plan(conn: &mut PgConnection) -> Result<Check> {
    let claims = [
        ("every queue", Claim::new("jobqueue-doctor").limit(1)),
        (
            "named queues",
            Claim::new("jobqueue-doctor").limit(1).queues(["default"]),
        ),
    ];
    let mut wrong = Vec::new();
    let mut examined = 0.0;
    for (label, claim) in &claims {
        let plan = read_as_runner(conn, |conn| {
            crate::plan::explain(conn, HotStatement::Claim(claim))
        })?;
        examined += plan.rows_examined();
        let through_index = plan
            .reads
            .iter()
            .any(|read| read.index.as_deref() == Some(FETCH_INDEX));
        let scans: Vec<&str> = plan
            .reads
            .iter()
            .filter(|read| read.index.is_none())
            .map(|read| read.node.as_str())
            .collect();
        if !through_index || !scans.is_empty() {
            // Each kind of read once, with how many nodes read so.
            let mut kinds: Vec<(String, usize)> = Vec::new();
            for read in &plan.reads {
                let kind = match &read.index {
                    Some(index) => format!("{} on {index}", read.node),
                    None => read.node.clone(),
                };
                match kinds.iter_mut().find(|(k, _)| *k == kind) {
                    Some((_, n)) => *n += 1,
                    None => kinds.push((kind, 1)),
                }
            }
            let how: Vec<String> = kinds
                .into_iter()
                .map(|(kind, n)| {
                    if n == 1 {
                        kind
                    } else {
                        format!("{kind} ({n} nodes)")
                    }
                })
                .collect();
            wrong.push(format!(
                "the claim of {label} reads jobqueue_jobs by {}",
                if how.is_empty() {
                    "nothing".to_owned()
                } else {
                    how.join(", ")
                }
            ));
        }
    }
    if wrong.is_empty() {
        return Ok(Check::ok(
            CLAIM_PLAN,
            format!(
                "both claims (every queue, named queues) read jobqueue_jobs through {FETCH_INDEX}"
            ),
        ));
    }
    let estimate = read(conn, |conn| {
        Ok(diesel::sql_query(sql::DOCTOR_TABLE_ESTIMATE)
            .get_result::<Estimate>(conn)?
            .rows)
    })?;
    if examined == 0.0 && estimate == 0.0 {
        return Ok(Check::ok(
            CLAIM_PLAN,
            "jobqueue_jobs is empty by its statistics: the claims' plans cost nothing now, \
             and are planned again as jobs arrive",
        ));
    }
    Ok(Check::graded(
        CLAIM_PLAN,
        CheckStatus::Fail,
        format!(
            "{}, not through {FETCH_INDEX}: its cost grows with the table",
            wrong.join("; ")
        ),
        format!(
            "if {FETCH_INDEX} is missing or invalid (see fetch index), {}; otherwise ANALYZE \
             jobqueue_jobs and check that nothing changes the planner settings of the runners' \
             sessions",
            sql::DOCTOR_FETCH_INDEX_DEFINITION
        ),
    ))
}
