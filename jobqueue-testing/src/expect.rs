//! Assertions on what was enqueued, typed by the job struct.

use std::any::type_name;

use chrono::{DateTime, Utc};
use diesel::PgConnection;
use jobqueue_core::{Job, JobRow, JobStatus, Result};

use crate::enqueued::EnqueuedJob;
use crate::listing::{self, time};

/// The statuses looked at unless told otherwise: the jobs waiting to run.
const WAITING: [JobStatus; 5] = [
    JobStatus::Blocked,
    JobStatus::Waiting,
    JobStatus::Scheduled,
    JobStatus::Pending,
    JobStatus::Unhandled,
];

/// A test's condition on a payload.
type Predicate<'p, T> = Box<dyn Fn(&T) -> bool + 'p>;

/// Jobs of other types a failure message lists at most.
const OTHERS_LISTED: usize = 20;

/// What a test expects of the jobs of type `T`: made by [`expect`],
/// narrowed by its payload ([`matching`](Self::matching)) and its row
/// (queue, priority, when due, unique key, status), then asserted
/// ([`assert_enqueued`](Self::assert_enqueued),
/// [`assert_enqueued_once`](Self::assert_enqueued_once),
/// [`assert_enqueued_times`](Self::assert_enqueued_times),
/// [`refute_enqueued`](Self::refute_enqueued)) or read
/// ([`find`](Self::find)).
///
/// It looks at the jobs waiting to run (blocked, waiting, scheduled,
/// pending or unhandled)
/// unless [`status`](Self::status) names others, on the connection given:
/// inside a test transaction, the test's own uncommitted jobs.
///
/// A failing assertion panics with a message saying what was expected and
/// what was enqueued: the jobs of type `T` with why each does not match,
/// then the latest jobs of other types.
#[must_use = "an expectation checks nothing until asserted"]
pub struct Expect<'p, T> {
    predicate: Option<Predicate<'p, T>>,
    queue: Option<String>,
    priority: Option<i32>,
    due: Option<(DateTime<Utc>, DateTime<Utc>)>,
    unique_key: Option<String>,
    tags: Vec<String>,
    meta: Vec<(String, serde_json::Value)>,
    statuses: Vec<JobStatus>,
}

impl<T> std::fmt::Debug for Expect<'_, T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Expect")
            .field("job", &type_name::<T>())
            .field("predicate", &self.predicate.is_some())
            .field("queue", &self.queue)
            .field("priority", &self.priority)
            .field("due", &self.due)
            .field("unique_key", &self.unique_key)
            .field("tags", &self.tags)
            .field("meta", &self.meta)
            .field("statuses", &self.statuses)
            .finish()
    }
}

/// An expectation of jobs of type `T`, any payload, waiting to run: see
/// [`Expect`].
///
/// ```no_run
/// # use jobqueue_core::Job;
/// # use serde::{Deserialize, Serialize};
/// # #[derive(Serialize, Deserialize, Job)]
/// # #[job(type = "email.send", queue = "mail")]
/// # struct SendEmail { to: String }
/// # fn test(conn: &mut diesel::PgConnection) {
/// let welcome = jobqueue_testing::expect::<SendEmail>()
///     .matching(|email| email.to == "ada@example.com")
///     .queue("mail")
///     .assert_enqueued_once(conn);
/// assert_eq!(welcome.job.to, "ada@example.com");
/// # }
/// ```
pub fn expect<'p, T: Job>() -> Expect<'p, T> {
    Expect {
        predicate: None,
        queue: None,
        priority: None,
        due: None,
        unique_key: None,
        tags: Vec::new(),
        meta: Vec::new(),
        statuses: Vec::new(),
    }
}

/// Asserts that a job of type `T` whose payload `predicate` accepts is
/// waiting to run, and returns the first (oldest) such; panics saying what
/// was enqueued otherwise. See [`Expect`] for more conditions.
#[track_caller]
pub fn assert_enqueued<T: Job>(
    conn: &mut PgConnection,
    predicate: impl Fn(&T) -> bool,
) -> EnqueuedJob<T> {
    expect::<T>().matching(predicate).assert_enqueued(conn)
}

/// Asserts that no job of type `T` whose payload `predicate` accepts is
/// waiting to run; panics listing those that are otherwise.
#[track_caller]
pub fn refute_enqueued<T: Job>(conn: &mut PgConnection, predicate: impl Fn(&T) -> bool) {
    expect::<T>().matching(predicate).refute_enqueued(conn);
}

/// Every job of type `T` waiting to run, decoded, oldest first. Panics if
/// the database cannot be read or a payload does not decode as `T`.
#[track_caller]
pub fn all_enqueued<T: Job>(conn: &mut PgConnection) -> Vec<EnqueuedJob<T>> {
    match expect::<T>().find(conn) {
        Ok(found) => found,
        Err(e) => panic!("reading the enqueued jobs of type `{}`: {e}", T::JOB_TYPE),
    }
}

/// The jobs of the expectation's type, sorted by whether they match it.
struct Sorted<T> {
    matching: Vec<EnqueuedJob<T>>,
    /// The others, each with why it does not match.
    other: Vec<(JobRow, String)>,
    /// The first payload that does not decode, if any.
    undecodable: Option<jobqueue_core::Error>,
}

impl<'p, T: Job> Expect<'p, T> {
    /// Only jobs whose payload `predicate` accepts.
    pub fn matching(mut self, predicate: impl Fn(&T) -> bool + 'p) -> Self {
        self.predicate = Some(Box::new(predicate));
        self
    }

    /// Only jobs in `queue`.
    pub fn queue(mut self, queue: impl Into<String>) -> Self {
        self.queue = Some(queue.into());
        self
    }

    /// Only jobs of `priority`.
    pub fn priority(mut self, priority: i32) -> Self {
        self.priority = Some(priority);
        self
    }

    /// Only jobs due between `earliest` and `latest` (both included).
    pub fn due_between(mut self, earliest: DateTime<Utc>, latest: DateTime<Utc>) -> Self {
        self.due = Some((earliest, latest));
        self
    }

    /// Only the job holding unique key `key`.
    pub fn unique_key(mut self, key: impl Into<String>) -> Self {
        self.unique_key = Some(key.into());
        self
    }

    /// Only jobs carrying `tag` (called again: carrying every tag named).
    pub fn tag(mut self, tag: impl Into<String>) -> Self {
        self.tags.push(tag.into());
        self
    }

    /// Only jobs whose metadata holds `value` at `key` (called again: every
    /// entry named).
    pub fn meta(mut self, key: impl Into<String>, value: impl Into<serde_json::Value>) -> Self {
        self.meta.push((key.into(), value.into()));
        self
    }

    /// Looks at jobs in `status` instead of those waiting to run; called
    /// again, at jobs in any of the statuses named (completed jobs are
    /// there only while the retention keeps them).
    pub fn status(mut self, status: JobStatus) -> Self {
        if !self.statuses.contains(&status) {
            self.statuses.push(status);
        }
        self
    }

    /// The matching jobs, oldest first; an error if the database cannot be
    /// read or a payload of type `T` does not decode as `T`.
    pub fn find(&self, conn: &mut PgConnection) -> Result<Vec<EnqueuedJob<T>>> {
        let sorted = self.sort(conn)?;
        match sorted.undecodable {
            Some(e) => Err(e),
            None => Ok(sorted.matching),
        }
    }

    /// Asserts that at least one job matches, and returns the first
    /// (oldest); panics saying what was enqueued otherwise.
    #[track_caller]
    pub fn assert_enqueued(&self, conn: &mut PgConnection) -> EnqueuedJob<T> {
        let sorted = self.sorted_or_panic(conn);
        match sorted.matching.into_iter().next() {
            Some(found) => found,
            None => {
                let head = format!("expected a job{}; none was", self.describe());
                panic!("{}", self.message(conn, &head, &[], &sorted.other));
            }
        }
    }

    /// Asserts that exactly one job matches, and returns it; panics saying
    /// what was enqueued otherwise.
    #[track_caller]
    pub fn assert_enqueued_once(&self, conn: &mut PgConnection) -> EnqueuedJob<T> {
        let mut found = self.assert_enqueued_times(conn, 1);
        match found.pop() {
            Some(one) => one,
            None => panic!("one job was asserted and none returned"),
        }
    }

    /// Asserts that exactly `times` jobs match, and returns them, oldest
    /// first; panics saying what was enqueued otherwise.
    #[track_caller]
    pub fn assert_enqueued_times(
        &self,
        conn: &mut PgConnection,
        times: usize,
    ) -> Vec<EnqueuedJob<T>> {
        let sorted = self.sorted_or_panic(conn);
        if sorted.matching.len() == times {
            return sorted.matching;
        }
        let head = format!(
            "expected exactly {times} job{}{}; found {}",
            if times == 1 { "" } else { "s" },
            self.describe(),
            sorted.matching.len()
        );
        panic!(
            "{}",
            self.message(conn, &head, &sorted.matching, &sorted.other)
        );
    }

    /// Asserts that no job matches; panics listing those that do
    /// otherwise.
    #[track_caller]
    pub fn refute_enqueued(&self, conn: &mut PgConnection) {
        let sorted = self.sorted_or_panic(conn);
        if sorted.matching.is_empty() {
            return;
        }
        let head = format!(
            "expected no job{}; found {}",
            self.describe(),
            sorted.matching.len()
        );
        panic!(
            "{}",
            self.message(conn, &head, &sorted.matching, &sorted.other)
        );
    }

    /// The statuses looked at.
    fn statuses(&self) -> &[JobStatus] {
        if self.statuses.is_empty() {
            &WAITING
        } else {
            &self.statuses
        }
    }

    /// The jobs of type `T` in the statuses looked at, sorted; panics if
    /// the database cannot be read.
    #[track_caller]
    fn sorted_or_panic(&self, conn: &mut PgConnection) -> Sorted<T> {
        match self.sort(conn) {
            Ok(sorted) => sorted,
            Err(e) => panic!("reading the enqueued jobs of type `{}`: {e}", T::JOB_TYPE),
        }
    }

    fn sort(&self, conn: &mut PgConnection) -> Result<Sorted<T>> {
        let rows = listing::jobs(conn, self.statuses(), Some(T::JOB_TYPE), None)?;
        let mut sorted = Sorted {
            matching: Vec::new(),
            other: Vec::new(),
            undecodable: None,
        };
        for row in rows {
            match row.payload_as::<T>() {
                Ok(job) => match self.mismatch(&row, &job) {
                    None => sorted.matching.push(EnqueuedJob::new(job, row)),
                    Some(why) => sorted.other.push((row, why)),
                },
                Err(e) => {
                    let why = format!("its payload does not decode as {}: {e}", type_name::<T>());
                    sorted.other.push((row, why));
                    sorted.undecodable.get_or_insert(e);
                }
            }
        }
        Ok(sorted)
    }

    /// Why `row` (decoded as `job`) does not match, if it does not.
    fn mismatch(&self, row: &JobRow, job: &T) -> Option<String> {
        let mut why = Vec::new();
        if let Some(queue) = self.queue.as_deref().filter(|q| *q != row.queue) {
            why.push(format!("queue `{}`, not `{queue}`", row.queue));
        }
        if let Some(priority) = self.priority.filter(|p| *p != row.priority) {
            why.push(format!("priority {}, not {priority}", row.priority));
        }
        if let Some((earliest, latest)) = self.due
            && !(earliest..=latest).contains(&row.run_at)
        {
            why.push(format!(
                "due {}, not between {} and {}",
                time(row.run_at),
                time(earliest),
                time(latest)
            ));
        }
        if let Some(key) = self
            .unique_key
            .as_deref()
            .filter(|k| row.unique_key.as_deref() != Some(*k))
        {
            let held = row
                .unique_key
                .as_deref()
                .map_or("no unique key".to_owned(), |k| format!("unique key `{k}`"));
            why.push(format!("{held}, not `{key}`"));
        }
        for tag in self.tags.iter().filter(|tag| !row.has_tag(tag)) {
            let carried = match &row.tags {
                Some(tags) => format!("tags `{}`", tags.join(" ")),
                None => "no tags".to_owned(),
            };
            why.push(format!("{carried}, not `{tag}`"));
        }
        for (key, value) in &self.meta {
            match row.meta(key) {
                Some(found) if found == value => {}
                Some(found) => why.push(format!("metadata `{key}` {found}, not {value}")),
                None => why.push(format!("no metadata `{key}`")),
            }
        }
        if why.is_empty()
            && let Some(predicate) = &self.predicate
            && !predicate(job)
        {
            why.push("the predicate does not accept its payload".to_owned());
        }
        (!why.is_empty()).then(|| why.join("; "))
    }

    /// The expectation in words, after "job": " of type ...".
    fn describe(&self) -> String {
        let mut text = format!(" of type `{}` ({})", T::JOB_TYPE, type_name::<T>());
        if let Some(queue) = &self.queue {
            text.push_str(&format!(" in queue `{queue}`"));
        }
        if let Some(priority) = self.priority {
            text.push_str(&format!(" of priority {priority}"));
        }
        if let Some((earliest, latest)) = self.due {
            text.push_str(&format!(
                " due between {} and {}",
                time(earliest),
                time(latest)
            ));
        }
        if let Some(key) = &self.unique_key {
            text.push_str(&format!(" with unique key `{key}`"));
        }
        for tag in &self.tags {
            text.push_str(&format!(" tagged `{tag}`"));
        }
        for (key, value) in &self.meta {
            text.push_str(&format!(" with metadata `{key}` {value}"));
        }
        if self.predicate.is_some() {
            text.push_str(" whose payload the predicate accepts");
        }
        text.push_str(&format!(", {}", statuses_text(self.statuses())));
        text
    }

    /// A failure message: `head`, the matching jobs, the others of type `T`
    /// with why they do not match, then the latest jobs of other types in
    /// the statuses looked at.
    fn message(
        &self,
        conn: &mut PgConnection,
        head: &str,
        matching: &[EnqueuedJob<T>],
        other: &[(JobRow, String)],
    ) -> String {
        let mut text = head.to_owned();
        if !matching.is_empty() {
            let rows: Vec<(&JobRow, String)> =
                matching.iter().map(|m| (&m.row, String::new())).collect();
            text.push_str("\n\n");
            text.push_str(&listing::list("matching", &rows));
        }
        let rows: Vec<(&JobRow, String)> = other
            .iter()
            .map(|(row, why)| (row, format!("does not match: {why}")))
            .collect();
        text.push_str("\n\n");
        text.push_str(&listing::list(
            &format!("other `{}` jobs", T::JOB_TYPE),
            &rows,
        ));
        let others = listing::jobs(
            conn,
            self.statuses(),
            None,
            Some(OTHERS_LISTED + matching.len() + other.len()),
        );
        text.push_str("\n\n");
        match others {
            Ok(rows) => {
                let rows: Vec<(&JobRow, String)> = rows
                    .iter()
                    .filter(|row| row.job_type != T::JOB_TYPE)
                    .take(OTHERS_LISTED)
                    .map(|row| (row, String::new()))
                    .collect();
                text.push_str(&listing::list(
                    &format!("jobs of other types (the latest {OTHERS_LISTED} at most)"),
                    &rows,
                ));
            }
            Err(e) => text.push_str(&format!("(the jobs of other types could not be read: {e})")),
        }
        text
    }
}

/// "blocked, waiting, scheduled, pending or unhandled", or whichever statuses are
/// looked at.
fn statuses_text(statuses: &[JobStatus]) -> String {
    let names: Vec<&str> = statuses.iter().map(|s| s.as_str()).collect();
    match names.split_last() {
        Some((last, [])) => (*last).to_owned(),
        Some((last, rest)) => format!("{} or {last}", rest.join(", ")),
        None => String::new(),
    }
}
