//! The dashboard's own HTTP server: a few threads answering on one socket.

use std::io::Read;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::Duration;

use crate::{Dashboard, DashboardError, Method, Request, Response};

/// Threads answering requests.
const THREADS: usize = 4;

/// How often a thread looks up from the socket to check for the stop.
const STOP_CHECK: Duration = Duration::from_millis(250);

/// The largest form body read (a form here is a few short fields).
const MOST_BODY: u64 = 64 * 1024;

/// A running dashboard server. Dropping it stops it.
#[derive(Debug)]
pub struct DashboardServer {
    addr: SocketAddr,
    stop: Arc<AtomicBool>,
    threads: Vec<JoinHandle<()>>,
}

impl DashboardServer {
    /// The address it answers on (the port the system chose, for port 0).
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Stops answering and waits for the threads.
    pub fn stop(mut self) {
        self.shut();
    }

    /// Waits until the server stops (it stops only when stopped or dropped
    /// from elsewhere: a process serving it ends it with a signal).
    pub fn wait(mut self) {
        for thread in self.threads.drain(..) {
            let _ = thread.join();
        }
    }

    fn shut(&mut self) {
        self.stop.store(true, Ordering::Release);
        for thread in self.threads.drain(..) {
            let _ = thread.join();
        }
    }
}

impl Drop for DashboardServer {
    fn drop(&mut self) {
        self.shut();
    }
}

/// Serves `dashboard` on `addr`. An address other machines can reach
/// (not loopback) needs the dashboard's access token.
pub fn serve(dashboard: Dashboard, addr: SocketAddr) -> Result<DashboardServer, DashboardError> {
    if !addr.ip().is_loopback() && dashboard.config.access_token.is_none() {
        return Err(DashboardError::NeedsToken(addr));
    }
    let server = tiny_http::Server::http(addr).map_err(|e| DashboardError::Bind {
        addr,
        reason: e.to_string(),
    })?;
    let bound = server.server_addr().to_ip().unwrap_or(addr);
    let (server, dashboard) = (Arc::new(server), Arc::new(dashboard));
    let stop = Arc::new(AtomicBool::new(false));
    let mut threads = Vec::new();
    for i in 0..THREADS {
        let (server, dashboard, stop) = (
            Arc::clone(&server),
            Arc::clone(&dashboard),
            Arc::clone(&stop),
        );
        threads.push(
            std::thread::Builder::new()
                .name(format!("jobqueue-dashboard-{i}"))
                .spawn(move || answer(&server, &dashboard, &stop))?,
        );
    }
    Ok(DashboardServer {
        addr: bound,
        stop,
        threads,
    })
}

fn answer(server: &tiny_http::Server, dashboard: &Dashboard, stop: &AtomicBool) {
    while !stop.load(Ordering::Acquire) {
        let mut request = match server.recv_timeout(STOP_CHECK) {
            Ok(Some(request)) => request,
            Ok(None) => continue,
            Err(e) => {
                log::warn!("dashboard: {e}");
                continue;
            }
        };
        let header = |name: &'static str| {
            request
                .headers()
                .iter()
                .find(|h| h.field.equiv(name))
                .map(|h| h.value.as_str().to_owned())
        };
        let method = match request.method() {
            tiny_http::Method::Get | tiny_http::Method::Head => Method::Get,
            tiny_http::Method::Post => Method::Post,
            _ => Method::Other,
        };
        let (cookie, authorization) = (header("Cookie"), header("Authorization"));
        let mut body = Vec::new();
        let read = request.as_reader().take(MOST_BODY).read_to_end(&mut body);
        if let Err(e) = read {
            log::debug!("dashboard: reading a request body: {e}");
            continue;
        }
        let asked = Request {
            method,
            path: request.url().to_owned(),
            cookie,
            authorization,
            body,
        };
        let response = dashboard.handle(&asked);
        if let Err(e) = request.respond(to_http(response)) {
            log::debug!("dashboard: the browser went away: {e}");
        }
    }
}

fn to_http(response: Response) -> tiny_http::Response<std::io::Cursor<Vec<u8>>> {
    let mut http = tiny_http::Response::from_data(response.body).with_status_code(response.status);
    for (name, value) in response.headers {
        if let Ok(header) = tiny_http::Header::from_bytes(name.as_bytes(), value.as_bytes()) {
            http.add_header(header);
        }
    }
    http
}
