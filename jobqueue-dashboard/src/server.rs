//! The dashboard's own HTTP server: one thread running a small tokio
//! runtime that holds every connection (a slow client costs a task, not a
//! thread), and blocking threads that make the pages.

use std::net::SocketAddr;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use tokio::sync::oneshot;

use crate::{Dashboard, DashboardError};

/// Threads making pages at once (each may hold one of the pool's
/// database connections; more requests wait their turn).
const PAGE_THREADS: usize = 8;

/// How long a stop waits for pages being made.
const STOP_GRACE: Duration = Duration::from_secs(5);

/// A running dashboard server. Dropping it stops it.
#[derive(Debug)]
pub struct DashboardServer {
    addr: SocketAddr,
    stop: Option<oneshot::Sender<()>>,
    thread: Option<JoinHandle<()>>,
}

impl DashboardServer {
    /// The address it answers on (the port the system chose, for port 0).
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Stops answering and waits for the server's thread (pages being made
    /// get a few seconds): the dashboard's counterpart of the runner's
    /// `RunnerHandle::shutdown`.
    pub fn shutdown(mut self) {
        self.shut();
    }

    /// Waits until the server stops (it stops only when stopped or dropped
    /// from elsewhere: a process serving it ends it with a signal).
    pub fn wait(mut self) {
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }

    fn shut(&mut self) {
        if let Some(stop) = self.stop.take() {
            // An error means the server has stopped already.
            let _ = stop.send(());
        }
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

impl Drop for DashboardServer {
    fn drop(&mut self) {
        self.shut();
    }
}

/// Serves `dashboard` on `addr`, with the limits of its configuration's
/// [`HttpLimits`](crate::HttpLimits). An address other machines can reach
/// (not loopback) needs the dashboard's access token. The dashboard
/// answers to the host names of
/// [`DashboardConfig::allowed_hosts`](crate::DashboardConfig::allowed_hosts)
/// and to the address it is bound to.
pub fn serve(
    mut dashboard: Dashboard,
    addr: SocketAddr,
) -> Result<DashboardServer, DashboardError> {
    if !addr.ip().is_loopback() && dashboard.config.access_token.is_none() {
        return Err(DashboardError::NeedsToken(addr));
    }
    let bind_error = |e: std::io::Error| DashboardError::Bind {
        addr,
        reason: e.to_string(),
    };
    let listener = std::net::TcpListener::bind(addr).map_err(bind_error)?;
    listener.set_nonblocking(true).map_err(bind_error)?;
    let bound = listener.local_addr().map_err(bind_error)?;
    dashboard.hosts.serve_on(bound.ip());
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .max_blocking_threads(PAGE_THREADS)
        .thread_name("jobqueue-dashboard-page")
        .build()?;
    let listener = {
        let _inside = runtime.enter();
        tokio::net::TcpListener::from_std(listener).map_err(bind_error)?
    };
    let limits = Arc::new(dashboard.config.http.clone());
    let (stop, stopped) = oneshot::channel();
    let thread = std::thread::Builder::new()
        .name("jobqueue-dashboard".to_owned())
        .spawn(move || {
            runtime.block_on(crate::listen::run(
                listener,
                Arc::new(dashboard),
                limits,
                stopped,
            ));
            runtime.shutdown_timeout(STOP_GRACE);
        })?;
    Ok(DashboardServer {
        addr: bound,
        stop: Some(stop),
        thread: Some(thread),
    })
}
