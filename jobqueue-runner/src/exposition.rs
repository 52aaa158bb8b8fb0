//! The Prometheus exposition: the registry of a runner's metrics and the
//! values read from the runner at scrape time, as OpenMetrics text (served
//! by `metrics_server`).

use std::sync::atomic::Ordering;
use std::sync::{Arc, Weak};

use prometheus_client::encoding::{DescriptorEncoder, EncodeLabelSet, EncodeMetric};
use prometheus_client::metrics::MetricType;
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;
use prometheus_client::registry::Registry;

use crate::shared::Shared;

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
        encode_gauges(
            &mut encoder,
            "workers",
            "This runner's worker threads, busy in a handler or idle",
            &[
                ([("state", "busy")], busy),
                ([("state", "idle")], (workers - busy).max(0)),
            ],
        )?;
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
        let labels = [
            ("worker_id", shared.config.worker_id.as_str()),
            ("version", crate::VERSION),
        ];
        encode_gauges(
            &mut encoder,
            "runner",
            "This runner: its worker id and version (always 1)",
            &[(labels, 1)],
        )
    }
}

/// Encodes the gauge family `name`, described by `help`: one series of
/// each `(labels, value)`.
fn encode_gauges<L: EncodeLabelSet>(
    encoder: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    series: &[(L, i64)],
) -> Result<(), std::fmt::Error> {
    let mut family = encoder.encode_descriptor(name, help, None, MetricType::Gauge)?;
    for (labels, value) in series {
        ConstGauge::new(*value).encode(family.encode_family(labels)?)?;
    }
    Ok(())
}
