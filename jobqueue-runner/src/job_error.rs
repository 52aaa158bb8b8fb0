//! What a handler returns when a job did not succeed.

use std::fmt;

/// The failure of one attempt, as the handler describes it.
///
/// `?` turns any error into [`JobError::Retry`], so a handler propagates
/// errors as usual; use [`JobError::fail`] when retrying cannot help.
/// What converts is whatever converts into `Box<dyn Error + Send + Sync>`:
/// every `std::error::Error + Send + Sync + 'static` type (`io::Error`,
/// `diesel::result::Error`, `jobqueue_core::Error`, an application's own
/// error enum), `Box<dyn Error + Send + Sync>` itself, `anyhow::Error`, and
/// `String` / `&str` messages. The stored text is the error's message
/// followed by those of its sources (`source()`) that the message does not
/// already contain, so context added on top of an error keeps its cause.
///
/// ```
/// use jobqueue_runner::JobError;
///
/// fn read_config(path: &str) -> Result<String, JobError> {
///     let text = std::fs::read_to_string(path)?;           // io::Error
///     let parsed: Result<u32, Box<dyn std::error::Error + Send + Sync>> =
///         text.trim().parse::<u32>().map_err(Into::into);
///     parsed?;                                             // a boxed error
///     if text.is_empty() {
///         Err("the config is empty")?;                     // a message
///     }
///     Ok(text)
/// }
/// assert!(matches!(read_config("/no/such/file"), Err(JobError::Retry(_))));
/// ```
#[derive(Debug)]
#[non_exhaustive]
pub enum JobError {
    /// The attempt failed; retry after the backoff while attempts remain.
    Retry(String),
    /// The job can never succeed: `failed` at once, whatever attempts remain.
    Fail(String),
    /// Not now: run the job again after this long, without using up an
    /// attempt (waiting on something outside: a report being generated, a
    /// rate limit's window). Its history records the snooze; a job that
    /// snoozed `max_snoozes` times (the runner's, default 100) fails instead.
    Snooze(std::time::Duration),
    /// The service the job calls said "too many requests, retry after
    /// this long" (HTTP 429 with `Retry-After`): the job runs again after
    /// it, without using up an attempt (a snooze, counted as one), and
    /// every runner holds back the job's whole queue until then, so the
    /// other jobs of the queue do not hit the same limit.
    RateLimited(std::time::Duration),
    /// The handler stopped because the job was cancelled: `cancelled`.
    Cancelled,
    /// The worker no longer holds the job (its lease expired and it was
    /// recovered); nothing the handler did through the runner counted.
    LeaseLost,
}

impl JobError {
    /// A failure worth retrying.
    pub fn retry(error: impl fmt::Display) -> Self {
        JobError::Retry(error.to_string())
    }

    /// Run the job again after `delay`, without using up an attempt (see
    /// [`JobError::Snooze`]).
    pub fn snooze(delay: std::time::Duration) -> Self {
        JobError::Snooze(delay)
    }

    /// The called service is rate limiting: run the job again after
    /// `retry_after`, and start no job of its queue until then, on any
    /// runner (see [`JobError::RateLimited`]).
    pub fn rate_limited(retry_after: std::time::Duration) -> Self {
        JobError::RateLimited(retry_after)
    }

    /// A failure retrying cannot fix.
    pub fn fail(error: impl fmt::Display) -> Self {
        JobError::Fail(error.to_string())
    }
}

impl fmt::Display for JobError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            JobError::Retry(e) => write!(f, "{e}"),
            JobError::Fail(e) => write!(f, "{e} (permanent)"),
            JobError::Snooze(delay) => write!(f, "snoozed for {delay:?}"),
            JobError::RateLimited(delay) => write!(f, "rate limited: retry after {delay:?}"),
            JobError::Cancelled => f.write_str("cancelled"),
            JobError::LeaseLost => {
                f.write_str("lease lost: the job was recovered by another worker")
            }
        }
    }
}

impl<E> From<E> for JobError
where
    E: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    fn from(error: E) -> Self {
        JobError::Retry(describe(error.into().as_ref()))
    }
}

/// An error's message, then each source's that the text so far does not
/// already include (many errors print their cause in their own message).
fn describe(error: &(dyn std::error::Error + 'static)) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        let cause_text = cause.to_string();
        if !text.contains(&cause_text) {
            text.push_str(": ");
            text.push_str(&cause_text);
        }
        source = cause.source();
    }
    text
}
