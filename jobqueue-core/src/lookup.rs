//! Reading one job by id, and when there is none, what the id and the
//! deployment's defaults say about why.

use std::time::Duration;

use chrono::{DateTime, Utc};
use diesel::prelude::*;
use diesel::sql_types::Timestamptz;

use crate::human::human_duration;
use crate::prune::Retention;
use crate::{JobId, JobRow, Result, sql};

/// How far ahead of the database's clock the time in a UUIDv7 may be and
/// still be taken for one an enqueue made (on a machine whose clock runs
/// that much fast).
pub const ID_CLOCK_TOLERANCE: Duration = Duration::from_secs(60);

/// What [`get_job`] found for an id.
#[derive(Debug, Clone)]
// A lookup is matched where it is returned, never stored in bulk: a boxed
// row would buy nothing but an allocation.
#[allow(clippy::large_enum_variant)]
pub enum JobLookup {
    /// The job's row.
    Found(JobRow),
    /// No row has this id; what the id says about why.
    NotFound(MissingJob),
}

impl JobLookup {
    /// The row, if found.
    pub fn found(self) -> Option<JobRow> {
        match self {
            JobLookup::Found(row) => Some(row),
            JobLookup::NotFound(_) => None,
        }
    }

    /// The row, or why there is none as an error (which says it in full).
    pub fn into_result(self) -> std::result::Result<JobRow, MissingJob> {
        match self {
            JobLookup::Found(row) => Ok(row),
            JobLookup::NotFound(missing) => Err(missing),
        }
    }
}

/// An id with no job row, and what it says about why. Its message (the
/// [`Display`](std::fmt::Display)) says it in full, with the retention
/// defaults.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("no job with id {id}: {reason}")]
pub struct MissingJob {
    /// The id asked for.
    pub id: JobId,
    /// Why no job has it, as far as the id tells.
    pub reason: Missing,
}

impl MissingJob {
    /// Whether the id shows that jobqueue never issued it (it is not a
    /// UUIDv7, or its time is ahead of the database's clock): no job ever
    /// had it, here or anywhere, so the id itself is wrong.
    pub fn never_issued(&self) -> bool {
        !matches!(self.reason, Missing::Gone { .. })
    }
}

/// Why an id has no job row, as far as the id tells. jobqueue's ids are
/// UUIDv7 made at enqueue from the enqueuing machine's clock.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Missing {
    /// The id could be one an enqueue made, `age` before the database's
    /// clock (at `issued_at`, the time it holds). Its job most likely
    /// finished and its row was deleted: a completed job as it completes
    /// unless runners keep completed jobs (`--retain-completed-hours`,
    /// `Retention::completed`), a failed or cancelled one after its
    /// retention (see [`Retention`]). Or it was never enqueued here: the
    /// enqueue's transaction rolled back, or it went to another database.
    Gone {
        /// The time the id holds.
        issued_at: DateTime<Utc>,
        /// How long before the database's clock that is (zero if ahead,
        /// within [`ID_CLOCK_TOLERANCE`]).
        age: Duration,
    },
    /// Not a UUIDv7, so jobqueue never issued it: `version` is the UUID's
    /// version (0 for the nil UUID).
    NotUuidV7 {
        /// The UUID's version number.
        version: usize,
    },
    /// A UUIDv7 whose time, `issued_at`, is `ahead` of the database's clock,
    /// by more than [`ID_CLOCK_TOLERANCE`]: no enqueue has made it yet (unless
    /// the machine that made it has a clock that far fast).
    AheadOfClock {
        /// The time the id holds.
        issued_at: DateTime<Utc>,
        /// How far ahead of the database's clock.
        ahead: Duration,
    },
}

impl std::fmt::Display for Missing {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Missing::Gone { issued_at, age } => {
                let defaults = Retention::default();
                write!(
                    f,
                    "it was made {} ago ({}) and its row is gone. Most likely the job \
                     finished: completed jobs are deleted as they complete unless runners \
                     keep them (`--retain-completed-hours`); failed jobs are pruned after \
                     {} and cancelled ones after {} unless runners keep them longer. Or it \
                     was never enqueued into this database (its transaction rolled back, or \
                     it went to another database)",
                    human_duration(*age),
                    issued_at.to_rfc3339(),
                    kept(defaults.failed),
                    kept(defaults.cancelled),
                )
            }
            Missing::NotUuidV7 { version } => write!(
                f,
                "jobqueue never issued it: job ids are UUIDv7, made at enqueue, and this is \
                 {}; check the id",
                match version {
                    0 => "the nil UUID".to_owned(),
                    v => format!("a version {v} UUID"),
                }
            ),
            Missing::AheadOfClock { issued_at, ahead } => write!(
                f,
                "jobqueue has not issued it: the time it holds, {}, is {} ahead of the \
                 database's clock (ids take the time of the machine that enqueues); check \
                 the id, or that machine's clock",
                issued_at.to_rfc3339(),
                human_duration(*ahead),
            ),
        }
    }
}

/// A default retention for people: `30 days`, or `never` for none.
fn kept(retention: Option<Duration>) -> String {
    match retention {
        None => "never".to_owned(),
        Some(keep) if keep.as_secs() % 86_400 == 0 => format!("{} days", keep.as_secs() / 86_400),
        Some(keep) => human_duration(keep),
    }
}

/// Reads one job by id: [`JobLookup::Found`] with its row, or
/// [`JobLookup::NotFound`] saying why there is none. A job's row is gone
/// once it is deleted: by default a completed job's as it completes, a
/// failed or cancelled job's after its retention; so a missing row is an
/// answer, not an error. On a miss, a UUIDv7's time is compared with the
/// database's clock (one more statement).
pub fn get_job(conn: &mut PgConnection, id: JobId) -> Result<JobLookup> {
    if let Some(row) = crate::row::read_job(conn, id)? {
        return Ok(JobLookup::Found(row));
    }
    Ok(JobLookup::NotFound(why_missing(conn, id)?))
}

/// Why no row has `id`, as far as the id tells (see [`Missing`]): for a job,
/// or a workflow (whose id is its first job's kind of id).
pub(crate) fn why_missing(conn: &mut PgConnection, id: JobId) -> Result<MissingJob> {
    let uuid = id.as_uuid();
    let (Some(timestamp), 7) = (uuid.get_timestamp(), uuid.get_version_num()) else {
        return Ok(MissingJob {
            id,
            reason: Missing::NotUuidV7 {
                version: uuid.get_version_num(),
            },
        });
    };
    let (secs, nanos) = timestamp.to_unix();
    let issued_at = i64::try_from(secs)
        .ok()
        .and_then(|secs| DateTime::from_timestamp(secs, nanos))
        .unwrap_or(DateTime::<Utc>::MAX_UTC);
    let now = database_clock(conn)?;
    let reason = match (issued_at - now).to_std() {
        Ok(ahead) if ahead > ID_CLOCK_TOLERANCE => Missing::AheadOfClock { issued_at, ahead },
        _ => Missing::Gone {
            issued_at,
            age: (now - issued_at).to_std().unwrap_or_default(),
        },
    };
    Ok(MissingJob { id, reason })
}

#[derive(QueryableByName)]
struct Clock {
    #[diesel(sql_type = Timestamptz)]
    now: DateTime<Utc>,
}

/// The database's clock now (not the transaction's start).
fn database_clock(conn: &mut PgConnection) -> Result<DateTime<Utc>> {
    Ok(diesel::sql_query(sql::SESSION_CLOCK)
        .get_result::<Clock>(conn)?
        .now)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_message_says_why_with_the_defaults() {
        let id = JobId::new();
        let gone = MissingJob {
            id,
            reason: Missing::Gone {
                issued_at: DateTime::UNIX_EPOCH,
                age: Duration::from_secs(3 * 3600),
            },
        };
        let text = gone.to_string();
        assert!(text.starts_with(&format!("no job with id {id}: it was made 3h 00m ago")));
        assert!(text.contains("completed jobs are deleted as they complete"));
        assert!(
            text.contains("failed jobs are pruned after 30 days and cancelled ones after 7 days")
        );
        assert!(!gone.never_issued());
        let nil = MissingJob {
            id,
            reason: Missing::NotUuidV7 { version: 0 },
        };
        assert!(nil.to_string().contains("this is the nil UUID"));
        assert!(nil.never_issued());
        assert_eq!(kept(None), "never");
        assert_eq!(kept(Some(Duration::from_secs(90))), "1m 30s");
    }
}
