//! The subscriber of the `trace` measurement's memory variant (feature
//! `tracing`), wired as an application would wire it: the W3C propagator as
//! the global one, and a `tracing_subscriber` registry at info level (the
//! runner's debug `claim` and `flush` spans off) with a
//! `tracing-opentelemetry` layer over an SDK tracer provider whose batch
//! processor exports to memory. The batch queue holds [`QUEUE`] spans, so a
//! drain's burst of attempt spans is exported rather than dropped.

use std::cell::Cell;

use opentelemetry::trace::TracerProvider as _;
use opentelemetry_sdk::propagation::TraceContextPropagator;
use opentelemetry_sdk::trace::{
    BatchConfigBuilder, BatchSpanProcessor, InMemorySpanExporter, SdkTracerProvider,
};
use tracing_subscriber::filter::LevelFilter;
use tracing_subscriber::layer::SubscriberExt;

use crate::ToolError;

/// Spans the batch processor's queue holds (the SDK's default is 2,048).
const QUEUE: usize = 65_536;

/// The installed subscriber's exporter, and the attempt spans counted so
/// far.
pub(crate) struct Memory {
    provider: SdkTracerProvider,
    exporter: InMemorySpanExporter,
    attempts: Cell<u64>,
    in_trace: Cell<u64>,
}

impl Memory {
    /// Installs the propagator and the subscriber as the process's globals
    /// (once per process).
    pub(crate) fn install() -> Result<Self, ToolError> {
        opentelemetry::global::set_text_map_propagator(TraceContextPropagator::new());
        let exporter = InMemorySpanExporter::default();
        let processor = BatchSpanProcessor::builder(exporter.clone())
            .with_batch_config(
                BatchConfigBuilder::default()
                    .with_max_queue_size(QUEUE)
                    .build(),
            )
            .build();
        let provider = SdkTracerProvider::builder()
            .with_span_processor(processor)
            .build();
        let layer = tracing_opentelemetry::layer().with_tracer(provider.tracer("jobqueue-bench"));
        let subscriber = tracing_subscriber::registry()
            .with(LevelFilter::INFO)
            .with(layer);
        tracing::subscriber::set_global_default(subscriber)
            .map_err(|e| ToolError::Usage(format!("cannot install the bench's subscriber: {e}")))?;
        Ok(Memory {
            provider,
            exporter,
            attempts: Cell::new(0),
            in_trace: Cell::new(0),
        })
    }

    /// Runs `f` inside a `request` span, as a request handler that
    /// enqueues would.
    pub(crate) fn in_request<T>(&self, f: impl FnOnce() -> T) -> T {
        tracing::info_span!("request").in_scope(f)
    }

    /// Waits until every span ended so far is exported.
    pub(crate) fn flush(&self) -> Result<(), ToolError> {
        self.provider
            .force_flush()
            .map_err(|e| ToolError::Usage(format!("the spans could not be exported: {e}")))
    }

    /// Counts the `attempt` spans exported since the last tally (and those
    /// whose parent is the context stored with their job), then empties
    /// the exporter.
    pub(crate) fn tally(&self) -> Result<(), ToolError> {
        self.flush()?;
        let spans = self
            .exporter
            .get_finished_spans()
            .map_err(|e| ToolError::Usage(format!("the exported spans cannot be read: {e}")))?;
        self.exporter.reset();
        let attempts = spans.iter().filter(|s| s.name == "attempt");
        let (all, in_trace) = attempts.fold((0, 0), |(all, in_trace), span| {
            (all + 1, in_trace + u64::from(span.parent_span_is_remote))
        });
        self.attempts.set(self.attempts.get() + all);
        self.in_trace.set(self.in_trace.get() + in_trace);
        Ok(())
    }

    /// The `attempt` spans counted, and those whose parent is the context
    /// stored with their job.
    pub(crate) fn totals(&self) -> (u64, u64) {
        (self.attempts.get(), self.in_trace.get())
    }
}
