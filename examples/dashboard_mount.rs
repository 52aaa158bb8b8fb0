//! The dashboard mounted in an application's own HTTP server, under
//! `/admin/jobs`, next to the application's own pages: the application
//! turns its server's request into a `jobqueue::dashboard::Request` and the
//! `Response` back (here with `tiny_http`; any server does). The
//! application keeps its own authentication in front of the mount; the
//! dashboard's CSRF tokens protect its actions.
//!
//! ```sh
//! DATABASE_URL=postgres://localhost/app cargo run --example dashboard_mount
//! # then open http://127.0.0.1:8081/admin/jobs/
//! ```

use std::error::Error;
use std::io::Read;

use jobqueue::dashboard::{Dashboard, DashboardConfig, Method, Request};

const MOUNT: &str = "/admin/jobs";

fn main() -> Result<(), Box<dyn Error + Send + Sync>> {
    let url = std::env::var("DATABASE_URL")
        .map_err(|_| "set DATABASE_URL to the application's database")?;
    let mut config = DashboardConfig::new(url);
    config.base_path = MOUNT.to_owned();
    let dashboard = Dashboard::new(config)?;
    let server = tiny_http::Server::http("127.0.0.1:8081")?;
    println!("the application at http://127.0.0.1:8081/, its jobs at {MOUNT}/");
    for mut request in server.incoming_requests() {
        let Some(below) = request.url().strip_prefix(MOUNT).map(str::to_owned) else {
            // The application's own pages.
            request.respond(tiny_http::Response::from_string(
                "the application's home page",
            ))?;
            continue;
        };
        let header = |name: &'static str| {
            request
                .headers()
                .iter()
                .find(|h| h.field.equiv(name))
                .map(|h| h.value.to_string())
        };
        let method = match request.method() {
            tiny_http::Method::Get => Method::Get,
            tiny_http::Method::Post => Method::Post,
            _ => Method::Other,
        };
        let mut asked = Request::new(method, if below.is_empty() { "/".into() } else { below });
        // The host and origin headers let the dashboard refuse pages of
        // other sites (a name rebound to this address, a form posted from
        // elsewhere); the application's own names go in `allowed_hosts`.
        asked.host = header("Host");
        asked.origin = header("Origin");
        asked.referer = header("Referer");
        asked.cookie = header("Cookie");
        asked.authorization = header("Authorization");
        // Judged on its headers first: a refused request's body is not read.
        let answer = match dashboard.check_headers(&asked) {
            Some(refused) => refused,
            None => {
                request
                    .as_reader()
                    .take(64 * 1024)
                    .read_to_end(&mut asked.body)?;
                dashboard.handle(&asked)
            }
        };
        let mut response =
            tiny_http::Response::from_data(answer.body).with_status_code(answer.status);
        for (name, value) in answer.headers {
            if let Ok(header) = tiny_http::Header::from_bytes(name.as_bytes(), value.as_bytes()) {
                response.add_header(header);
            }
        }
        request.respond(response)?;
    }
    Ok(())
}
