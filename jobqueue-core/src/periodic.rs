//! Periodic jobs: schedules declared by a worker binary, stored in
//! `jobqueue_schedules`, fired by whichever runner gets to a due slot first.
//!
//! Each slot fires by ONE statement that moves the schedule's `last_slot`
//! from the value the runner read to the slot (compare and set) and inserts
//! the slot's job: with any number of runners, killed and restarted at any
//! point, each slot gives one job. Slots are computed from the database's
//! `now()`, never from a runner's clock.

use chrono::{DateTime, Utc};
use diesel::prelude::*;
use diesel::sql_types::{Array, BigInt, Bool, Integer, Nullable, Text, Timestamptz, Uuid};

use crate::isolation::read_committed;
use crate::{CronSchedule, Error, Job, JobId, JobOptions, NewJob, Result, limits, sql};

/// What a schedule does with slots that passed while no runner fired them
/// (every runner down, or the schedule just declared again after a stop).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum Missed {
    /// Fire the latest missed slot once.
    #[default]
    Latest,
    /// Fire each missed slot, at most this many (the newest).
    CatchUp(u32),
}

/// A schedule as a worker binary declares it: a name, a cron expression
/// (in a time zone), and the job each slot enqueues.
///
/// ```
/// use jobqueue_core::{Job, Missed, Periodic};
/// # #[derive(serde::Serialize, serde::Deserialize, Job)]
/// # #[job(type = "digest.send", queue = "mail")]
/// # struct Digest { kind: String }
///
/// let nightly = Periodic::new("nightly-digest", "0 3 * * *", &Digest { kind: "daily".into() })
///     .time_zone("Europe/Paris")
///     .missed(Missed::CatchUp(3));
/// assert!(nightly.validate().is_ok());
/// ```
#[derive(Debug, Clone)]
pub struct Periodic {
    name: String,
    cron: String,
    time_zone: Option<String>,
    missed: Missed,
    job: Result<NewJob, String>,
}

impl Periodic {
    /// A schedule named `name` (1 to 128 characters of `[A-Za-z0-9_.:-]`)
    /// whose slots, given by `cron`, each enqueue `job` with its type's
    /// defaults. Everything is checked by [`Periodic::validate`], which a
    /// runner calls before it starts.
    pub fn new<J: Job>(name: impl Into<String>, cron: impl Into<String>, job: &J) -> Self {
        Self::with_options(name, cron, job, JobOptions::new())
    }

    /// Like [`Periodic::new`], with options for the slots' jobs (queue,
    /// priority, attempts, tags, metadata; a schedule or a unique key is
    /// refused). The process's enqueue hooks run on the job when the
    /// schedule is declared (at a runner's start), and every slot copies
    /// what they made of it. A concurrency key is not copied: the slots'
    /// jobs are inserted pending, outside any key's limit.
    pub fn with_options<J: Job>(
        name: impl Into<String>,
        cron: impl Into<String>,
        job: &J,
        options: JobOptions,
    ) -> Self {
        Periodic {
            name: name.into(),
            cron: cron.into(),
            time_zone: None,
            missed: Missed::Latest,
            job: NewJob::from_job(job, options).map_err(|e| e.to_string()),
        }
    }

    /// The time zone of the expression (an IANA name); default UTC.
    pub fn time_zone(mut self, time_zone: impl Into<String>) -> Self {
        self.time_zone = Some(time_zone.into());
        self
    }

    /// What to do with missed slots; default [`Missed::Latest`].
    pub fn missed(mut self, missed: Missed) -> Self {
        self.missed = missed;
        self
    }

    /// The schedule's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The job type its slots enqueue, if its job could be built.
    pub fn job_type(&self) -> Option<&str> {
        self.job.as_ref().ok().map(NewJob::job_type)
    }

    /// Checks the name, the expression, the time zone, the policy and the
    /// job; the error names the schedule and what is wrong.
    pub fn validate(&self) -> Result<CronSchedule> {
        let named = |reason: String| Error::InvalidOption {
            field: "schedule",
            reason: format!("schedule `{}`: {reason}", self.name),
        };
        limits::check_schedule_name(&self.name).map_err(|e| named(e.to_string()))?;
        let schedule = CronSchedule::parse(&self.cron, self.time_zone.as_deref())
            .map_err(|e| named(e.to_string()))?;
        if self.missed == Missed::CatchUp(0) {
            return Err(named(
                "catching up on at most 0 slots: give at least 1".into(),
            ));
        }
        let job = self.job.as_ref().map_err(|e| named(e.clone()))?;
        if job.unique_key.is_some() || job.run_at.is_some() || job.delay_secs > 0.0 {
            return Err(named(
                "its job may not have a unique key, a run_at or a delay: each slot sets when it runs"
                    .into(),
            ));
        }
        Ok(schedule)
    }
}

/// Declares `schedules` (checked first): new ones fire from now on;
/// existing ones keep their pause and their last slot (moved to now if the
/// expression or time zone changed) and are marked declared now.
pub fn declare_schedules(conn: &mut PgConnection, schedules: &[Periodic]) -> Result<()> {
    for schedule in schedules {
        schedule.validate()?;
    }
    read_committed(conn, |conn| {
        for schedule in schedules {
            let job = schedule
                .job
                .as_ref()
                .map_err(|e| Error::invalid("schedule", e.clone()))?;
            // The process's enqueue hooks, on the job every slot copies.
            let job = crate::enqueue_hooks::applied(job)?;
            let (missed, most) = match schedule.missed {
                Missed::Latest => ("latest", 1),
                Missed::CatchUp(most) => ("catch_up", i32::try_from(most).unwrap_or(i32::MAX)),
            };
            diesel::sql_query(sql::SCHEDULE_DECLARE)
                .bind::<Text, _>(&schedule.name)
                .bind::<Text, _>(&schedule.cron)
                .bind::<Nullable<Text>, _>(schedule.time_zone.as_deref())
                .bind::<Text, _>(missed)
                .bind::<Integer, _>(most)
                .bind::<Text, _>(&job.job_type)
                .bind::<Text, _>(&job.queue)
                .bind::<Integer, _>(job.priority)
                .bind::<Integer, _>(job.max_attempts)
                .bind::<Text, _>(&job.payload)
                .bind::<Nullable<Array<Text>>, _>((!job.tags.is_empty()).then_some(&job.tags))
                .bind::<Nullable<Text>, _>(job.metadata.as_deref())
                .execute(conn)?;
        }
        Ok(())
    })
}

#[derive(QueryableByName)]
struct StateRow {
    #[diesel(sql_type = Text)]
    name: String,
    #[diesel(sql_type = Timestamptz)]
    last_slot: DateTime<Utc>,
    #[diesel(sql_type = Bool)]
    paused: bool,
    #[diesel(sql_type = Timestamptz)]
    db_now: DateTime<Utc>,
}

#[derive(QueryableByName)]
struct Fired {
    #[diesel(sql_type = BigInt)]
    fired: i64,
}

/// What one pass of [`fire_due`] did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct FirePass {
    /// Jobs enqueued, by schedule.
    pub fired: Vec<(String, usize)>,
    /// The earliest slot still ahead among the schedules (not paused), by
    /// the database's clock, and the database's `now()` when read: when the
    /// next pass is worth running.
    pub next: Option<(DateTime<Utc>, DateTime<Utc>)>,
}

/// Fires the due slots of `schedules` (declared before), by the database's
/// clock, each following its missed-slot policy. Safe from any number of
/// runners at once: a slot another runner fired first is not fired again.
pub fn fire_due(conn: &mut PgConnection, schedules: &[Periodic]) -> Result<FirePass> {
    let parsed: Vec<(&Periodic, CronSchedule)> = schedules
        .iter()
        .map(|p| Ok((p, p.validate()?)))
        .collect::<Result<_>>()?;
    let names: Vec<&str> = schedules.iter().map(|p| p.name.as_str()).collect();
    let states = diesel::sql_query(sql::SCHEDULE_STATE)
        .bind::<Array<Text>, _>(&names)
        .load::<StateRow>(conn)?;
    let mut pass = FirePass::default();
    for state in states {
        let Some((periodic, schedule)) = parsed.iter().find(|(p, _)| p.name == state.name) else {
            continue;
        };
        let most = match periodic.missed {
            Missed::Latest => 1,
            Missed::CatchUp(most) => most as usize,
        };
        // A paused schedule fires nothing, but its next slot still sets
        // when to look again (it may be resumed meanwhile).
        let slots = if state.paused {
            Vec::new()
        } else {
            schedule.slots_between(state.last_slot, state.db_now, most)
        };
        if let Some(&newest) = slots.last() {
            let ids: Vec<JobId> = slots.iter().map(|_| JobId::new()).collect();
            let fired = read_committed(conn, |conn| {
                Ok(diesel::sql_query(sql::SCHEDULE_FIRE)
                    .bind::<Text, _>(&state.name)
                    .bind::<Timestamptz, _>(state.last_slot)
                    .bind::<Timestamptz, _>(newest)
                    .bind::<Array<Timestamptz>, _>(&slots)
                    .bind::<Array<Uuid>, _>(&ids)
                    .bind::<Text, _>(crate::enqueue::NOTIFY_CHANNEL)
                    .get_result::<Fired>(conn)?)
            })?;
            if fired.fired > 0 {
                pass.fired.push((state.name.clone(), fired.fired as usize));
            }
        }
        let after = slots
            .last()
            .copied()
            .unwrap_or(state.last_slot)
            .max(state.db_now);
        if let Some(next) = schedule.next_after(after)
            && pass.next.is_none_or(|(soonest, _)| next < soonest)
        {
            pass.next = Some((next, state.db_now));
        }
    }
    Ok(pass)
}

/// One schedule as [`list_schedules`] sees it.
#[derive(Debug, Clone, PartialEq, QueryableByName)]
#[non_exhaustive]
pub struct ScheduleInfo {
    /// Its name.
    #[diesel(sql_type = Text)]
    pub name: String,
    /// Its cron expression.
    #[diesel(sql_type = Text)]
    pub cron: String,
    /// Its time zone (UTC if none).
    #[diesel(sql_type = Nullable<Text>)]
    pub time_zone: Option<String>,
    /// `latest` or `catch_up`.
    #[diesel(sql_type = Text)]
    pub missed: String,
    /// With `catch_up`: the most missed slots fired.
    #[diesel(sql_type = Integer)]
    pub catch_up_most: i32,
    /// The job type its slots enqueue.
    #[diesel(sql_type = Text)]
    pub job_type: String,
    /// Their queue.
    #[diesel(sql_type = Text)]
    pub queue: String,
    /// Paused: fires nothing.
    #[diesel(sql_type = Bool)]
    pub paused: bool,
    /// Slots up to this instant have fired (or were skipped).
    #[diesel(sql_type = Timestamptz)]
    pub last_slot: DateTime<Utc>,
    /// When a runner last declared it.
    #[diesel(sql_type = Timestamptz)]
    pub declared_at: DateTime<Utc>,
    /// The database's `now()` when listed.
    #[diesel(sql_type = Timestamptz)]
    pub db_now: DateTime<Utc>,
}

/// How long after its last declaration a schedule counts as removed from
/// the code (runners declare theirs at start and every minute).
pub const ORPHANED_AFTER: std::time::Duration = std::time::Duration::from_secs(600);

impl ScheduleInfo {
    /// The next slot after the last one fired, by its expression (`None` if
    /// the stored expression no longer parses).
    pub fn next_slot(&self) -> Option<DateTime<Utc>> {
        CronSchedule::parse(&self.cron, self.time_zone.as_deref())
            .ok()?
            .next_after(self.last_slot.max(self.db_now))
    }

    /// No runner has declared it for [`ORPHANED_AFTER`]: removed from the
    /// code; it fires nothing, and is kept with its history.
    pub fn is_orphaned(&self) -> bool {
        (self.db_now - self.declared_at)
            .to_std()
            .unwrap_or_default()
            > ORPHANED_AFTER
    }
}

/// Every schedule, by name.
pub fn list_schedules(conn: &mut PgConnection) -> Result<Vec<ScheduleInfo>> {
    Ok(diesel::sql_query(sql::SCHEDULE_LIST).load::<ScheduleInfo>(conn)?)
}

#[derive(QueryableByName)]
struct WasPaused {
    #[diesel(sql_type = Bool)]
    was_paused: bool,
}

/// Pauses (`true`) or resumes a schedule, durably; returns whether it was
/// paused. A resumed schedule fires none of the slots that passed while it
/// was paused. [`Error::UnknownSchedule`] lists the schedules there are.
pub fn set_schedule_paused(conn: &mut PgConnection, name: &str, paused: bool) -> Result<bool> {
    limits::check_schedule_name(name)?;
    let rows = read_committed(conn, |conn| {
        Ok(diesel::sql_query(sql::SCHEDULE_SET_PAUSED)
            .bind::<Text, _>(name)
            .bind::<Bool, _>(paused)
            .load::<WasPaused>(conn)?)
    })?;
    match rows.first() {
        Some(row) => Ok(row.was_paused),
        None => Err(unknown(conn, name)),
    }
}

/// Enqueues one job of schedule `name` now, outside its slots (its slots
/// are unchanged); returns its id.
pub fn run_schedule_now(conn: &mut PgConnection, name: &str) -> Result<JobId> {
    limits::check_schedule_name(name)?;
    let id = JobId::new();
    let fired = read_committed(conn, |conn| {
        Ok(diesel::sql_query(sql::SCHEDULE_RUN_NOW)
            .bind::<Text, _>(name)
            .bind::<Uuid, _>(id)
            .bind::<Text, _>(crate::enqueue::NOTIFY_CHANNEL)
            .get_result::<Fired>(conn)?)
    })?;
    if fired.fired == 1 {
        Ok(id)
    } else {
        Err(unknown(conn, name))
    }
}

fn unknown(conn: &mut PgConnection, name: &str) -> Error {
    let known = list_schedules(conn)
        .map(|all| all.into_iter().map(|s| s.name).collect())
        .unwrap_or_default();
    Error::UnknownSchedule {
        schedule: name.to_owned(),
        known,
    }
}
