//! The Prometheus exposition: the registry of a runner's metrics, the
//! values read from the runner at scrape time, and the HTTP endpoint that
//! serves them (`GET /metrics`, OpenMetrics text).

use std::net::SocketAddr;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Weak};
use std::time::Duration;

use crossbeam_channel::Receiver;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;
use prometheus_client::registry::Registry;

use crate::backoff::is_stopped;
use crate::shared::Shared;

/// The content type of OpenMetrics text, which Prometheus scrapes.
const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// How often the server looks up from its socket to check for shutdown.
const STOP_CHECK: Duration = Duration::from_millis(250);

/// The registry of a runner's metrics, every name prefixed `jobqueue_`.
pub(crate) fn registry(shared: &Arc<Shared>) -> Option<Registry> {
    let metrics = shared.metrics.as_ref()?;
    let mut registry = Registry::with_prefix("jobqueue");
    metrics.register(&mut registry);
    registry.register_collector(Box::new(RunnerNow {
        shared: Arc::downgrade(shared),
    }));
    Some(registry)
}

/// `registry` as OpenMetrics text.
pub(crate) fn encode(registry: &Registry) -> String {
    let mut text = String::new();
    // Writing into a String cannot fail; an encoder error would be a
    // defect in a metric, and a partial page is still the best answer.
    if let Err(e) = prometheus_client::encoding::text::encode(&mut text, registry) {
        log::error!("encoding the metrics failed: {e}");
    }
    text
}

/// Binds the metrics address, so a runner whose address is taken or
/// invalid refuses to start instead of running without its metrics.
pub(crate) fn bind(addr: SocketAddr) -> Result<tiny_http::Server, crate::RunnerError> {
    tiny_http::Server::http(addr).map_err(|e| crate::RunnerError::Metrics {
        addr,
        reason: e.to_string(),
    })
}

/// Serves `GET /metrics` until `stop` disconnects.
pub(crate) fn serve(server: tiny_http::Server, registry: Arc<Registry>, stop: Receiver<()>) {
    while !is_stopped(&stop) {
        let request = match server.recv_timeout(STOP_CHECK) {
            Ok(Some(request)) => request,
            Ok(None) => continue,
            Err(e) => {
                log::warn!("metrics endpoint: {e}");
                continue;
            }
        };
        let path = request.url().split('?').next().unwrap_or("");
        let response = match (request.method(), path) {
            (tiny_http::Method::Get, "/metrics") => {
                tiny_http::Response::from_string(encode(&registry))
                    .with_header(header(CONTENT_TYPE))
            }
            _ => tiny_http::Response::from_string("not found: the metrics are at GET /metrics\n")
                .with_status_code(404)
                .with_header(header("text/plain; charset=utf-8")),
        };
        if let Err(e) = request.respond(response) {
            log::debug!("metrics endpoint: the scraper went away: {e}");
        }
    }
    log::debug!("metrics endpoint stopped");
}

fn header(content_type: &str) -> tiny_http::Header {
    tiny_http::Header {
        field: "Content-Type"
            .parse()
            .unwrap_or_else(|_| unreachable!("a valid header name")),
        value: content_type
            .parse()
            .unwrap_or_else(|_| unreachable!("an ASCII header value")),
    }
}

/// What the runner's own state says at scrape time: its workers, the jobs
/// it holds, its reconnects, its identity.
#[derive(Debug)]
struct RunnerNow {
    /// Weak: the registry lives as long as its server, not the runner.
    shared: Weak<Shared>,
}

impl prometheus_client::collector::Collector for RunnerNow {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let Some(shared) = self.shared.upgrade() else {
            return Ok(());
        };
        let busy = shared.busy_workers.load(Ordering::Relaxed) as i64;
        let workers = shared.config.concurrency as i64;
        let gauge = ConstGauge::new(0i64);
        let mut family = encoder.encode_descriptor(
            "workers",
            "This runner's worker threads, busy in a handler or idle",
            None,
            gauge.metric_type(),
        )?;
        for (state, n) in [("busy", busy), ("idle", (workers - busy).max(0))] {
            let labels = [("state", state)];
            ConstGauge::new(n).encode(family.encode_family(&labels)?)?;
        }
        let held = ConstGauge::new(shared.inflight.len() as i64);
        held.encode(encoder.encode_descriptor(
            "jobs_held",
            "Jobs this runner holds: claimed, running, or finished with the outcome not written yet",
            None,
            held.metric_type(),
        )?)?;
        let reconnects = ConstCounter::new(shared.health.reconnects());
        reconnects.encode(encoder.encode_descriptor(
            "db_reconnects",
            "Database connections of this runner's threads opened again after one was lost",
            None,
            reconnects.metric_type(),
        )?)?;
        let info = ConstGauge::new(1i64);
        let mut family = encoder.encode_descriptor(
            "runner",
            "This runner: its worker id and version (always 1)",
            None,
            info.metric_type(),
        )?;
        let labels = [
            ("worker_id", shared.config.worker_id.as_str()),
            ("version", crate::VERSION),
        ];
        info.encode(family.encode_family(&labels)?)?;
        Ok(())
    }
}
