//! The JSON the read commands print with `--json`: `list` one object per
//! line, `show`, `stats`, `queue list`, `runners` and `cron list` one
//! document each. The field names are an interface for scripts, listed in
//! the guide's page on the command; they are set here, apart from the
//! library's rows, so that a change there does not rename them. Text from
//! the database is printed as stored (JSON escapes its control
//! characters); times are RFC 3339 in UTC; ages are seconds.

use chrono::{DateTime, Utc};
use jobqueue_core::{JobRow, JobStatus, QueueInfo, RunnerRow, ScheduleInfo, TypeStats};
use serde::Serialize;
use serde::ser::SerializeMap;

/// A job as `list` prints it: one line of JSON.
#[derive(Serialize)]
pub(crate) struct JobSummary<'a> {
    id: String,
    job_type: &'a str,
    queue: &'a str,
    status: &'static str,
    priority: i32,
    attempts: i32,
    max_attempts: i32,
    run_at: DateTime<Utc>,
    created_at: DateTime<Utc>,
    last_error: Option<&'a str>,
    tags: &'a [String],
}

impl<'a> JobSummary<'a> {
    pub(crate) fn of(job: &'a JobRow) -> Self {
        JobSummary {
            id: job.id.to_string(),
            job_type: &job.job_type,
            queue: &job.queue,
            status: job.status.as_str(),
            priority: job.priority,
            attempts: job.attempts,
            max_attempts: job.max_attempts,
            run_at: job.run_at,
            created_at: job.created_at,
            last_error: job.last_error.as_deref(),
            tags: job.tags.as_deref().unwrap_or_default(),
        }
    }
}

/// A job as `show` prints it: the summary's fields, then the rest of the
/// row.
#[derive(Serialize)]
pub(crate) struct JobDetail<'a> {
    #[serde(flatten)]
    summary: JobSummary<'a>,
    unique_key: Option<&'a str>,
    concurrency_key: Option<&'a str>,
    claimed_at: Option<DateTime<Utc>>,
    started_at: Option<DateTime<Utc>>,
    finished_at: Option<DateTime<Utc>>,
    worker_id: Option<&'a str>,
    lease_expires_at: Option<DateTime<Utc>>,
    cancel_requested: bool,
    progress: i16,
    current_stage: Option<&'a str>,
    events_count: i32,
    payload: &'a serde_json::Value,
    errors: &'a serde_json::Value,
    traceparent: Option<&'a str>,
    metadata: Option<&'a serde_json::Value>,
    step_outputs: Option<&'a serde_json::Value>,
    step_cursor: Option<&'a serde_json::Value>,
    result: Option<&'a serde_json::Value>,
}

impl<'a> JobDetail<'a> {
    /// `job`, with the result kept for its enqueuer, if any.
    pub(crate) fn of(job: &'a JobRow, result: Option<&'a serde_json::Value>) -> Self {
        JobDetail {
            summary: JobSummary::of(job),
            unique_key: job.unique_key.as_deref(),
            concurrency_key: job.concurrency_key.as_deref(),
            claimed_at: job.claimed_at,
            started_at: job.started_at,
            finished_at: job.finished_at,
            worker_id: job.worker_id.as_deref(),
            lease_expires_at: job.lease_expires_at,
            cancel_requested: job.cancel_requested,
            progress: job.progress,
            current_stage: job.current_stage.as_deref(),
            events_count: job.events_count,
            traceparent: job.traceparent.as_deref(),
            payload: &job.payload,
            errors: &job.errors,
            metadata: job.metadata.as_ref(),
            step_outputs: job.step_outputs.as_ref(),
            step_cursor: job.step_cursor.as_ref(),
            result,
        }
    }
}

/// Jobs per status, in lifecycle order: a count, or `null` for a status
/// not counted (`stats` counts completed and cancelled jobs only with
/// `--history`).
pub(crate) struct Counts(Vec<(JobStatus, Option<i64>)>);

impl Serialize for Counts {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(Some(self.0.len()))?;
        for (status, count) in &self.0 {
            map.serialize_entry(status.as_str(), count)?;
        }
        map.end()
    }
}

/// `stats`: jobs by queue and status, completions lately, live jobs by type.
#[derive(Serialize)]
pub(crate) struct Stats<'a> {
    /// Whether completed and cancelled rows were counted (`--history`).
    pub(crate) history: bool,
    pub(crate) queues: Vec<QueueCounts<'a>>,
    pub(crate) completed: Completed,
    pub(crate) types: Vec<TypeCounts<'a>>,
}

/// One queue of `stats`.
#[derive(Serialize)]
pub(crate) struct QueueCounts<'a> {
    queue: &'a str,
    counts: Counts,
    oldest_due_secs: Option<f64>,
}

impl<'a> QueueCounts<'a> {
    /// `q`'s counts; completed and cancelled are `null` unless `history`.
    pub(crate) fn of(q: &'a QueueInfo, history: bool) -> Self {
        let counts = JobStatus::ALL
            .into_iter()
            .map(|s| {
                let counted = history || !matches!(s, JobStatus::Completed | JobStatus::Cancelled);
                (s, counted.then(|| q.count(s)))
            })
            .collect();
        QueueCounts {
            queue: &q.queue,
            counts: Counts(counts),
            oldest_due_secs: q.oldest_due_age().map(|age| age.as_secs_f64()),
        }
    }
}

/// Completions counted lately.
#[derive(Serialize)]
pub(crate) struct Completed {
    pub(crate) last_hour: i64,
    pub(crate) last_day: i64,
}

/// One job type of `stats`: its live jobs.
#[derive(Serialize)]
pub(crate) struct TypeCounts<'a> {
    job_type: &'a str,
    counts: Counts,
    /// A live runner handles the type.
    handled: bool,
}

impl<'a> TypeCounts<'a> {
    /// `t`'s jobs in each live status (`live`).
    pub(crate) fn of(t: &'a TypeStats, live: &[JobStatus], handled: bool) -> Self {
        let counts = live
            .iter()
            .map(|s| (*s, Some(t.counts.get(s).copied().unwrap_or(0))))
            .collect();
        TypeCounts {
            job_type: &t.job_type,
            counts: Counts(counts),
            handled,
        }
    }
}

/// `queue list`.
#[derive(Serialize)]
pub(crate) struct Queues<'a> {
    pub(crate) queues: Vec<QueueLine<'a>>,
}

/// One queue of `queue list`.
#[derive(Serialize)]
pub(crate) struct QueueLine<'a> {
    queue: &'a str,
    paused: bool,
    due: i64,
    scheduled: i64,
    unhandled: i64,
    held: i64,
    failed: i64,
    oldest_due_secs: Option<f64>,
    limit: Option<i32>,
    rate_limit: Option<Rate>,
    rate_started: Option<i64>,
    backoff_secs: Option<f64>,
    key_limit: Option<Keys>,
    keys_held: Option<i64>,
    waiting_on_key: i64,
    blocked_on_parents: i64,
    /// Declared settings an operator changed since: `{setting, now,
    /// declared}`.
    overrides: Vec<Override>,
}

/// A declared setting that differs now, in `queue list --json`.
#[derive(Serialize)]
struct Override {
    setting: &'static str,
    now: String,
    declared: String,
}

/// A queue's key limit in `queue list --json`.
#[derive(Serialize)]
struct Keys {
    per_key: u32,
    ordered: bool,
}

/// A queue's rate limit in `queue list --json`.
#[derive(Serialize)]
struct Rate {
    starts: u32,
    period_secs: f64,
}

impl<'a> QueueLine<'a> {
    pub(crate) fn of(q: &'a QueueInfo) -> Self {
        QueueLine {
            queue: &q.queue,
            paused: q.paused,
            due: q.count(JobStatus::Pending),
            scheduled: q.count(JobStatus::Scheduled),
            unhandled: q.count(JobStatus::Unhandled),
            held: q.held(),
            failed: q.count(JobStatus::Failed),
            oldest_due_secs: q.oldest_due_age().map(|age| age.as_secs_f64()),
            limit: q.global_limit,
            rate_limit: q.rate_limit.map(|rate| Rate {
                starts: rate.starts(),
                period_secs: rate.period().as_secs_f64(),
            }),
            rate_started: q.rate_limit.map(|_| q.rate_used),
            backoff_secs: q.backoff_left().map(|left| left.as_secs_f64()),
            key_limit: q.key_limit.map(|limit| Keys {
                per_key: limit.jobs_per_key(),
                ordered: limit.is_ordered(),
            }),
            keys_held: q.key_limit.map(|_| q.keys_held),
            waiting_on_key: q.count(JobStatus::Waiting),
            blocked_on_parents: q.count(JobStatus::Blocked),
            overrides: q
                .overrides()
                .into_iter()
                .map(|o| Override {
                    setting: o.setting,
                    now: o.now,
                    declared: o.declared,
                })
                .collect(),
        }
    }
}

/// `runners`.
#[derive(Serialize)]
pub(crate) struct Runners<'a> {
    pub(crate) runners: Vec<Runner<'a>>,
}

/// One runner of `runners`.
#[derive(Serialize)]
pub(crate) struct Runner<'a> {
    worker_id: &'a str,
    host: &'a str,
    pid: i32,
    version: &'a str,
    concurrency: i32,
    /// Empty: every queue.
    queues: &'a [String],
    job_types: &'a [String],
    started_at: DateTime<Utc>,
    last_seen: DateTime<Utc>,
    silent_secs: f64,
    /// `live`, or `gone` (not seen for three leases: it died).
    state: &'static str,
}

impl<'a> Runner<'a> {
    pub(crate) fn of(r: &'a RunnerRow) -> Self {
        Runner {
            worker_id: &r.worker_id,
            host: &r.host,
            pid: r.pid,
            version: &r.version,
            concurrency: r.concurrency,
            queues: &r.queues,
            job_types: &r.job_types,
            started_at: r.started_at,
            last_seen: r.last_seen,
            silent_secs: r.silent_for().as_secs_f64(),
            state: runner_state(r),
        }
    }
}

/// `live` or `gone`, as `runners` says.
pub(crate) fn runner_state(r: &RunnerRow) -> &'static str {
    if r.is_gone() { "gone" } else { "live" }
}

/// `cron list`.
#[derive(Serialize)]
pub(crate) struct Schedules<'a> {
    pub(crate) schedules: Vec<Schedule<'a>>,
}

/// One schedule of `cron list`.
#[derive(Serialize)]
pub(crate) struct Schedule<'a> {
    name: &'a str,
    cron: &'a str,
    time_zone: &'a str,
    job_type: &'a str,
    queue: &'a str,
    last_slot: DateTime<Utc>,
    next_slot: Option<DateTime<Utc>>,
    /// `active`, `paused` or `orphaned` (no runner declares it any more).
    state: &'static str,
}

impl<'a> Schedule<'a> {
    pub(crate) fn of(s: &'a ScheduleInfo) -> Self {
        Schedule {
            name: &s.name,
            cron: &s.cron,
            time_zone: schedule_zone(s),
            job_type: &s.job_type,
            queue: &s.queue,
            last_slot: s.last_slot,
            next_slot: s.next_slot(),
            state: schedule_state(s),
        }
    }
}

/// The schedule's time zone, `UTC` when it names none.
pub(crate) fn schedule_zone(s: &ScheduleInfo) -> &str {
    s.time_zone.as_deref().unwrap_or("UTC")
}

/// `active`, `paused` or `orphaned`.
pub(crate) fn schedule_state(s: &ScheduleInfo) -> &'static str {
    match (s.paused, s.is_orphaned()) {
        (_, true) => "orphaned",
        (true, false) => "paused",
        (false, false) => "active",
    }
}
