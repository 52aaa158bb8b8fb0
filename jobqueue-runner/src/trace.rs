//! The runner's `tracing` spans (the `tracing` feature): one per attempt
//! of a job, around its handler, and at debug level one per claim batch
//! and one per completion flush. Without the feature each span here is an
//! empty type whose calls do nothing, and `tracing` is not a dependency.
//!
//! Spans are named `attempt`, `claim` and `flush`, with target
//! `jobqueue_runner`; the runner's `log` lines are written as before.
//!
//! A job enqueued inside a traced span carries that span's W3C
//! `traceparent` (see `jobqueue_core`'s `tracing` feature). Its first
//! attempt's span is a child of it, in the enqueuer's trace; an attempt
//! after a retry, a snooze or a rescue starts a trace of its own, linked to
//! it (a trace per attempt keeps a job retried over hours from stretching
//! the request's trace). A job without one (enqueued outside a span, by a
//! schedule, from the command line) starts a trace of its own.

use jobqueue_core::JobRow;
use jobqueue_core::engine::Claim;

/// The span of one attempt of a job: `attempt`, at info level, with the
/// job's `job_id`, `job_type`, `queue`, `attempt` and `priority`; its
/// `outcome` (and `error` when it failed) recorded when it ends.
pub(crate) struct AttemptSpan {
    #[cfg(feature = "tracing")]
    span: tracing::Span,
}

impl AttemptSpan {
    /// The span of `row`'s attempt, not entered yet: a child of the span
    /// that enqueued the job for its first attempt, linked to it for the
    /// others.
    #[inline]
    pub(crate) fn new(row: &JobRow) -> Self {
        #[cfg(not(feature = "tracing"))]
        let _ = row;
        #[cfg(feature = "tracing")]
        let span = tracing::info_span!(
            target: "jobqueue_runner",
            "attempt",
            job_id = %row.id,
            job_type = %row.job_type,
            queue = %row.queue,
            attempt = row.attempts,
            priority = row.priority,
            outcome = tracing::field::Empty,
            error = tracing::field::Empty,
        );
        #[cfg(feature = "tracing")]
        follow_enqueuer(&span, row);
        AttemptSpan {
            #[cfg(feature = "tracing")]
            span,
        }
    }

    /// Runs `f` inside the span: the spans and events of `f` (the
    /// handler's) are its children.
    #[inline]
    pub(crate) fn in_scope<T>(&self, f: impl FnOnce() -> T) -> T {
        #[cfg(feature = "tracing")]
        return self.span.in_scope(f);
        #[cfg(not(feature = "tracing"))]
        f()
    }

    /// `future` inside the span: what it logs while it is polled is the
    /// span's (an async handler's attempt).
    #[cfg(feature = "async")]
    pub(crate) fn instrument<F: std::future::Future>(
        &self,
        future: F,
    ) -> impl std::future::Future<Output = F::Output> {
        #[cfg(feature = "tracing")]
        return tracing::Instrument::instrument(future, self.span.clone());
        #[cfg(not(feature = "tracing"))]
        future
    }

    /// Records how the attempt ended: the outcome's name, and its error
    /// for a failure; `outcome` is called only if the feature is on.
    #[inline]
    pub(crate) fn ended<'a>(&self, outcome: impl FnOnce() -> (&'static str, Option<&'a str>)) {
        #[cfg(not(feature = "tracing"))]
        let _ = outcome;
        #[cfg(feature = "tracing")]
        {
            let (name, error) = outcome();
            self.span.record("outcome", tracing::field::display(name));
            if let Some(error) = error {
                self.span.record("error", error);
            }
        }
    }
}

/// Makes `span`, the span of `row`'s attempt, a child of the span that
/// enqueued the job (its first attempt: no attempt used before it, no
/// snooze), or links it to that span (any later one).
#[cfg(feature = "tracing")]
fn follow_enqueuer(span: &tracing::Span, row: &JobRow) {
    use opentelemetry::trace::TraceContextExt;
    use tracing_opentelemetry::OpenTelemetrySpanExt;

    if span.is_disabled() {
        return;
    }
    let Some(enqueuer) = row
        .traceparent
        .as_deref()
        .and_then(jobqueue_core::engine::enqueuer_context)
    else {
        return;
    };
    if row.attempts <= 1 && row.snoozes == 0 {
        // Fails only without an OpenTelemetry layer, which has no trace to
        // put the span in.
        let _ = span.set_parent(enqueuer);
    } else {
        span.add_link(enqueuer.span().span_context().clone());
    }
}

/// The span of one claim statement, entered while it exists: `claim`, at
/// debug level, with who claimed (`by`: `fetcher` or `early`), the
/// `queues` asked for (`*`: every queue) and the `limit`; the jobs
/// `claimed` recorded once the claim returned them.
pub(crate) struct ClaimSpan {
    #[cfg(feature = "tracing")]
    span: tracing::span::EnteredSpan,
}

impl ClaimSpan {
    /// Enters the span of `claim`, made by `by`.
    #[inline]
    pub(crate) fn enter(by: &'static str, claim: &Claim) -> Self {
        #[cfg(not(feature = "tracing"))]
        let _ = (by, claim);
        ClaimSpan {
            #[cfg(feature = "tracing")]
            span: tracing::debug_span!(
                target: "jobqueue_runner",
                "claim",
                by = %by,
                queues = %Queues(&claim.queues),
                limit = claim.limit,
                claimed = tracing::field::Empty,
            )
            .entered(),
        }
    }

    /// Records how many jobs the claim took, and ends the span.
    #[inline]
    pub(crate) fn claimed(self, jobs: usize) {
        #[cfg(not(feature = "tracing"))]
        let _ = jobs;
        #[cfg(feature = "tracing")]
        self.span.record("claimed", jobs);
    }
}

/// The span of one completion flush, entered while it exists: `flush`, at
/// debug level, with the outcomes `pending` and, at its end, how many were
/// `written` (the others wait for the next flush).
pub(crate) struct FlushSpan {
    #[cfg(feature = "tracing")]
    span: tracing::span::EnteredSpan,
}

impl FlushSpan {
    /// Enters the span of a flush of `pending` outcomes.
    #[inline]
    pub(crate) fn enter(pending: usize) -> Self {
        #[cfg(not(feature = "tracing"))]
        let _ = pending;
        FlushSpan {
            #[cfg(feature = "tracing")]
            span: tracing::debug_span!(
                target: "jobqueue_runner",
                "flush",
                pending,
                written = tracing::field::Empty,
            )
            .entered(),
        }
    }

    /// Records how many outcomes the flush wrote, and ends the span.
    #[inline]
    pub(crate) fn written(self, outcomes: usize) {
        #[cfg(not(feature = "tracing"))]
        let _ = outcomes;
        #[cfg(feature = "tracing")]
        self.span.record("written", outcomes);
    }
}

/// A claim's queues as a span field: comma-separated, `*` for every queue;
/// formatted only if a subscriber records the span.
#[cfg(feature = "tracing")]
struct Queues<'a>(&'a [String]);

#[cfg(feature = "tracing")]
impl std::fmt::Display for Queues<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.0.is_empty() {
            return f.write_str("*");
        }
        for (i, queue) in self.0.iter().enumerate() {
            if i > 0 {
                f.write_str(",")?;
            }
            f.write_str(queue)?;
        }
        Ok(())
    }
}
