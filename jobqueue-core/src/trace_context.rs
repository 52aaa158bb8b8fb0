//! The trace context a job carries from its enqueuer to its attempts (the
//! `tracing` feature).
//!
//! An enqueue made inside a span with a valid OpenTelemetry context (the
//! application's `tracing-opentelemetry` layer, or a context it attached
//! itself) runs in an `enqueue` span, a child of that one, and stores the
//! `enqueue` span's W3C `traceparent` with each of its jobs. The header is
//! written and read by the application's global text-map propagator
//! (`opentelemetry::global::set_text_map_propagator`, set to the W3C
//! `TraceContextPropagator`): the library depends on OpenTelemetry's API,
//! never on an SDK. An enqueue outside such a span stores nothing and opens
//! no span, so its jobs' attempts start traces of their own, as periodic
//! jobs and jobs enqueued from the command line do.
//!
//! Without the feature every function here is an empty inline one and the
//! jobs' `traceparent` stays NULL.

#[cfg(feature = "tracing")]
use opentelemetry::propagation::{Extractor, Injector};
#[cfg(feature = "tracing")]
use opentelemetry::trace::TraceContextExt;
#[cfg(feature = "tracing")]
use tracing_opentelemetry::OpenTelemetrySpanExt;

use crate::NewJob;

/// The header the trace context is stored as.
#[cfg(feature = "tracing")]
const TRACEPARENT: &str = "traceparent";

/// An enqueue's span and the `traceparent` stored with its jobs.
pub(crate) struct EnqueueTrace {
    /// The `enqueue` span, when the enqueue runs inside a traced span.
    #[cfg(feature = "tracing")]
    span: Option<tracing::Span>,
    /// What the jobs' `traceparent` column gets.
    pub(crate) traceparent: Option<String>,
}

impl EnqueueTrace {
    /// The trace of an enqueue of `jobs` (`first` among them): an `enqueue`
    /// span (fields `job_id` and `job_type`, `queue` of the first job, and
    /// `jobs`) and its `traceparent`, if the current span has a valid
    /// trace context; else neither.
    #[inline]
    pub(crate) fn start(first: &NewJob, jobs: usize) -> Self {
        #[cfg(not(feature = "tracing"))]
        {
            let _ = (first, jobs);
            EnqueueTrace { traceparent: None }
        }
        #[cfg(feature = "tracing")]
        {
            let outside = EnqueueTrace {
                span: None,
                traceparent: None,
            };
            if !current_context().span().span_context().is_valid() {
                return outside;
            }
            let span = tracing::info_span!(
                target: "jobqueue",
                "enqueue",
                job_id = %first.id,
                job_type = %first.job_type,
                queue = %first.queue,
                jobs,
            );
            let traceparent = traceparent_of(&span.context());
            EnqueueTrace {
                span: Some(span),
                traceparent,
            }
        }
    }

    /// Runs `f` inside the `enqueue` span, if there is one.
    #[inline]
    pub(crate) fn in_scope<T>(&self, f: impl FnOnce() -> T) -> T {
        #[cfg(feature = "tracing")]
        if let Some(span) = &self.span {
            return span.in_scope(f);
        }
        f()
    }

    /// The `enqueue` span, to instrument an awaited enqueue with (a
    /// disabled span when there is none).
    #[cfg(all(feature = "async", feature = "tracing"))]
    pub(crate) fn span(&self) -> tracing::Span {
        self.span.clone().unwrap_or_else(tracing::Span::none)
    }
}

/// The OpenTelemetry context of the current `tracing` span, or, when it has
/// none (no `tracing-opentelemetry` layer), the context the application
/// attached to this thread.
#[cfg(feature = "tracing")]
fn current_context() -> opentelemetry::Context {
    let context = tracing::Span::current().context();
    if context.span().span_context().is_valid() {
        context
    } else {
        opentelemetry::Context::current()
    }
}

/// `context`'s `traceparent`, as the global propagator writes it; `None`
/// if the propagator writes none (none set, or not the W3C one).
#[cfg(feature = "tracing")]
fn traceparent_of(context: &opentelemetry::Context) -> Option<String> {
    let mut header = Header(None);
    opentelemetry::global::get_text_map_propagator(|propagator| {
        propagator.inject_context(context, &mut header);
    });
    header.0
}

/// The OpenTelemetry context a stored `traceparent` stands for, as the
/// global propagator reads it: the remote parent of a job's first attempt,
/// and the link of its later ones. `None` if the header does not hold a
/// valid span context (or the propagator reads none).
#[cfg(feature = "tracing")]
pub fn enqueuer_context(traceparent: &str) -> Option<opentelemetry::Context> {
    let header = Header(Some(traceparent.to_owned()));
    let context =
        opentelemetry::global::get_text_map_propagator(|propagator| propagator.extract(&header));
    context.span().span_context().is_valid().then_some(context)
}

/// A carrier of the one header jobs store.
#[cfg(feature = "tracing")]
struct Header(Option<String>);

#[cfg(feature = "tracing")]
impl Injector for Header {
    fn set(&mut self, key: &str, value: String) {
        if key == TRACEPARENT {
            self.0 = Some(value);
        }
    }
}

#[cfg(feature = "tracing")]
impl Extractor for Header {
    fn get(&self, key: &str) -> Option<&str> {
        if key == TRACEPARENT {
            self.0.as_deref()
        } else {
            None
        }
    }

    fn keys(&self) -> Vec<&str> {
        vec![TRACEPARENT]
    }
}
