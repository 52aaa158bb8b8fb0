//! The dashboard server's socket: connections accepted up to a limit, each
//! served by hyper on a task of its own with the header timeout and size
//! limits, until the server is stopped.

use std::sync::Arc;
use std::time::Duration;

use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::net::TcpListener;
use tokio::sync::{Semaphore, oneshot};

use crate::{Dashboard, HttpLimits};

/// How long to wait after the system refused a connection (out of file
/// descriptors, say) before accepting again, so the loop does not spin.
const ACCEPT_BACKOFF: Duration = Duration::from_millis(100);

/// Accepts and serves connections until `stop` fires (or its sender is
/// dropped).
pub(crate) async fn run(
    listener: TcpListener,
    dashboard: Arc<Dashboard>,
    limits: Arc<HttpLimits>,
    mut stop: oneshot::Receiver<()>,
) {
    let slots = Arc::new(Semaphore::new(limits.max_connections.max(1)));
    let mut http = http1::Builder::new();
    http.timer(TokioTimer::new())
        .header_read_timeout(limits.header_read_timeout)
        .max_header_size(limits.max_header_bytes);
    loop {
        let slot = tokio::select! {
            _ = &mut stop => break,
            slot = Arc::clone(&slots).acquire_owned() => slot,
        };
        let Ok(slot) = slot else { break };
        let accepted = tokio::select! {
            _ = &mut stop => break,
            accepted = listener.accept() => accepted,
        };
        let (stream, peer) = match accepted {
            Ok(accepted) => accepted,
            Err(e) => {
                log::warn!("dashboard: accepting a connection: {e}");
                tokio::time::sleep(ACCEPT_BACKOFF).await;
                continue;
            }
        };
        let (dashboard, limits) = (Arc::clone(&dashboard), Arc::clone(&limits));
        let connection = http.serve_connection(
            TokioIo::new(stream),
            service_fn(move |request| {
                crate::exchange::answer(Arc::clone(&dashboard), Arc::clone(&limits), request)
            }),
        );
        tokio::spawn(async move {
            if let Err(e) = connection.await {
                // Slow or broken clients: the header timeout, a reset.
                log::debug!("dashboard: connection from {peer}: {e}");
            }
            drop(slot);
        });
    }
}
