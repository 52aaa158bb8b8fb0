//! The HTTP endpoint of a runner's metrics (`GET /metrics`): hyper on a
//! small tokio runtime of its own thread, every connection a task, so a
//! slow or stalled scraper holds only its own connection, and closed when
//! its request does not arrive in time. Request bodies are never read.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use crossbeam_channel::Receiver;
use http_body_util::Full;
use hyper::body::{Bytes, Incoming};
use hyper::header::{CONNECTION, CONTENT_TYPE, HeaderValue};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::{TokioIo, TokioTimer};
use prometheus_client::registry::Registry;
use tokio::sync::Semaphore;

use crate::backoff::is_stopped;

/// The content type of OpenMetrics text, which Prometheus scrapes.
const OPENMETRICS: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// How often the server looks up to check for the runner's shutdown.
const STOP_CHECK: Duration = Duration::from_millis(250);

/// How long to wait after the system refused a connection before
/// accepting again.
const ACCEPT_BACKOFF: Duration = Duration::from_millis(100);

/// The limits of a runner's metrics endpoint, so that slow or oversized
/// requests cannot hold it (set with [`Runner::metrics_limits`](crate::Runner::metrics_limits)).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct MetricsLimits {
    /// How long a connection may take to send a request's line and
    /// headers, counted from when the server starts waiting for them (on a
    /// kept-alive connection, from the previous answer): then it is
    /// closed. Default 10 s.
    pub header_read_timeout: Duration,
    /// The largest request line and headers, in bytes: larger ones get
    /// 431. Default 16 KiB.
    pub max_header_bytes: usize,
    /// Connections served at once; more wait to be accepted until one
    /// closes. Default 64.
    pub max_connections: usize,
}

impl Default for MetricsLimits {
    fn default() -> Self {
        MetricsLimits {
            header_read_timeout: Duration::from_secs(10),
            max_header_bytes: 16 * 1024,
            max_connections: 64,
        }
    }
}

/// A bound metrics endpoint, not serving yet.
#[derive(Debug)]
pub(crate) struct MetricsServer {
    listener: std::net::TcpListener,
    addr: SocketAddr,
    runtime: tokio::runtime::Runtime,
}

impl MetricsServer {
    /// Binds `addr`, so a runner whose address is taken or invalid refuses
    /// to start instead of running without its metrics.
    pub(crate) fn bind(addr: SocketAddr) -> Result<Self, crate::RunnerError> {
        let error = |e: std::io::Error| crate::RunnerError::Metrics {
            addr,
            reason: e.to_string(),
        };
        let listener = std::net::TcpListener::bind(addr).map_err(error)?;
        listener.set_nonblocking(true).map_err(error)?;
        let bound = listener.local_addr().map_err(error)?;
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?;
        Ok(MetricsServer {
            listener,
            addr: bound,
            runtime,
        })
    }

    /// The address it answers on.
    pub(crate) fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Serves `GET /metrics` until `stop` disconnects.
    pub(crate) fn serve(self, registry: Arc<Registry>, limits: MetricsLimits, stop: Receiver<()>) {
        let MetricsServer {
            listener, runtime, ..
        } = self;
        runtime.block_on(async move {
            let listener = match tokio::net::TcpListener::from_std(listener) {
                Ok(listener) => listener,
                Err(e) => {
                    log::error!("metrics endpoint: cannot serve its socket: {e}");
                    return;
                }
            };
            accept(listener, registry, limits, stop).await;
        });
        // Connections still open are dropped with the runtime.
        runtime.shutdown_background();
        log::debug!("metrics endpoint stopped");
    }
}

/// Accepts and serves connections until `stop` disconnects.
async fn accept(
    listener: tokio::net::TcpListener,
    registry: Arc<Registry>,
    limits: MetricsLimits,
    stop: Receiver<()>,
) {
    let slots = Arc::new(Semaphore::new(limits.max_connections.max(1)));
    let mut http = http1::Builder::new();
    http.timer(TokioTimer::new())
        .header_read_timeout(limits.header_read_timeout)
        .max_header_size(limits.max_header_bytes);
    let mut check = tokio::time::interval(STOP_CHECK);
    let mut slot = None;
    while !is_stopped(&stop) {
        if slot.is_none() {
            tokio::select! {
                _ = check.tick() => continue,
                acquired = Arc::clone(&slots).acquire_owned() => match acquired {
                    Ok(acquired) => slot = Some(acquired),
                    Err(_) => break,
                },
            }
        }
        let accepted = tokio::select! {
            _ = check.tick() => continue,
            accepted = listener.accept() => accepted,
        };
        let (stream, peer) = match accepted {
            Ok(accepted) => accepted,
            Err(e) => {
                log::warn!("metrics endpoint: accepting a connection: {e}");
                tokio::time::sleep(ACCEPT_BACKOFF).await;
                continue;
            }
        };
        let held = slot.take();
        let registry = Arc::clone(&registry);
        let connection = http.serve_connection(
            TokioIo::new(stream),
            service_fn(move |request| {
                let answer = answer(&registry, &request);
                async move { Ok::<_, std::convert::Infallible>(answer) }
            }),
        );
        tokio::spawn(async move {
            if let Err(e) = connection.await {
                log::debug!("metrics endpoint: connection from {peer}: {e}");
            }
            drop(held);
        });
    }
}

/// The answer to one request: the metrics for `GET /metrics`, 404
/// otherwise. A request with a body is answered without reading it, and
/// its connection closed.
fn answer(registry: &Registry, request: &hyper::Request<Incoming>) -> hyper::Response<Full<Bytes>> {
    let path = request.uri().path();
    let get = matches!(*request.method(), hyper::Method::GET | hyper::Method::HEAD);
    let (status, content_type, body) = if get && path == "/metrics" {
        (200, OPENMETRICS, crate::exposition::encode(registry))
    } else {
        (
            404,
            "text/plain; charset=utf-8",
            "not found: the metrics are at GET /metrics\n".to_owned(),
        )
    };
    let mut response = hyper::Response::new(Full::new(Bytes::from(body)));
    *response.status_mut() =
        hyper::StatusCode::from_u16(status).unwrap_or(hyper::StatusCode::INTERNAL_SERVER_ERROR);
    response
        .headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static(content_type));
    if !hyper::body::Body::is_end_stream(request.body()) {
        response
            .headers_mut()
            .insert(CONNECTION, HeaderValue::from_static("close"));
    }
    response
}
