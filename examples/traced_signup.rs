//! A request's trace carried into its job, across processes (feature
//! `tracing`): the web process enqueues inside its request's span; the
//! worker process, later, works the job in an `attempt` span that is a child
//! of that enqueue, in the same trace. Both processes export their spans to
//! stdout through OpenTelemetry's SDK; an application points the same setup
//! at its collector with `opentelemetry-otlp`'s exporter instead.
//!
//! With `DATABASE_URL` set: `cargo run --example traced_signup -- migrate`,
//! then `-- sign-up a@example.com` (prints the request's trace id, then its
//! spans) and `-- work` (prints each span as it ends; Ctrl-C to stop).

use diesel::prelude::*;
use jobqueue::prelude::*;
use opentelemetry::trace::{TraceContextExt, TracerProvider as _};
use opentelemetry_sdk::propagation::TraceContextPropagator;
use opentelemetry_sdk::trace::SdkTracerProvider;
use serde::{Deserialize, Serialize};
use tracing_opentelemetry::OpenTelemetrySpanExt;
use tracing_subscriber::filter::LevelFilter;
use tracing_subscriber::layer::{Layer as _, SubscriberExt};

#[derive(Serialize, Deserialize, Job)]
#[job(type = "email.welcome", queue = "mail")]
struct Welcome {
    to: String,
}

impl Perform for Welcome {
    fn perform(&self, _ctx: &mut JobContext<'_>) -> Result<(), JobError> {
        // A span of the handler's own: a child of the job's attempt.
        let _render = tracing::info_span!("render", to = %self.to).entered();
        tracing::info!("welcome mail rendered");
        Ok(())
    }
}

/// Installs the process's tracing: W3C trace context as the propagator
/// (what jobqueue stores with each job and reads back), and every span
/// exported to stdout as it ends. Returns the provider, to shut down (and
/// so flush) before the process exits.
fn install_tracing(service: &'static str) -> Result<SdkTracerProvider, Box<dyn std::error::Error>> {
    opentelemetry::global::set_text_map_propagator(TraceContextPropagator::new());
    // Production would use `with_batch_exporter` and an OTLP exporter.
    let provider = SdkTracerProvider::builder()
        .with_simple_exporter(opentelemetry_stdout::SpanExporter::default())
        .build();
    // Info and above: the runner's debug spans of each claim and flush stay
    // out of the export.
    let layer = tracing_opentelemetry::layer()
        .with_tracer(provider.tracer(service))
        .with_filter(LevelFilter::INFO);
    tracing::subscriber::set_global_default(tracing_subscriber::registry().with(layer))?;
    Ok(provider)
}

/// The web request: a `POST /signup` span, and the job enqueued in its
/// transaction. Returns the request's trace id.
fn sign_up(conn: &mut PgConnection, email: &str) -> Result<String, jobqueue::Error> {
    let request = tracing::info_span!("POST /signup", email);
    let _entered = request.enter();
    conn.transaction(|conn| Welcome { to: email.into() }.enqueue(conn).map(drop))?;
    Ok(request
        .context()
        .span()
        .span_context()
        .trace_id()
        .to_string())
}

fn main() -> Result<std::process::ExitCode, Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    if let [_, command, email] = args.as_slice()
        && command == "sign-up"
    {
        let provider = install_tracing("web")?;
        let mut conn = PgConnection::establish(&std::env::var("DATABASE_URL")?)?;
        let trace = sign_up(&mut conn, email)?;
        println!("trace {trace}");
        provider.shutdown()?;
        return Ok(std::process::ExitCode::SUCCESS);
    }
    let provider = install_tracing("worker")?;
    let status = jobqueue::Cli::new().register::<Welcome>().main();
    provider.shutdown()?;
    Ok(status)
}
