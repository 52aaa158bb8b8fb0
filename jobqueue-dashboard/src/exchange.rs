//! One request on the dashboard's own server and its answer: the headers
//! judged first, the body read (an action's only) within its size and
//! time limits, the page made on a blocking thread (it reads the database).

use std::convert::Infallible;
use std::sync::Arc;

use http_body_util::{BodyExt, Full, LengthLimitError, Limited};
use hyper::body::{Body, Bytes, Incoming};
use hyper::header::{HeaderMap, HeaderName, HeaderValue};

use crate::{Dashboard, HttpLimits, Method, Request, Response, pages, routes};

/// What hyper sends back.
pub(crate) type Answer = hyper::Response<Full<Bytes>>;

/// Answers `asked`. Never fails: every refusal is an HTTP answer.
pub(crate) async fn answer(
    dashboard: Arc<Dashboard>,
    limits: Arc<HttpLimits>,
    asked: hyper::Request<Incoming>,
) -> Result<Answer, Infallible> {
    let (head, body) = asked.into_parts();
    let mut request = request_of(&head);
    if let Some(refused) = dashboard.check_headers(&request) {
        // The body, if any, is not read: hyper closes the connection
        // after this answer rather than read what is left of it.
        return Ok(to_http(refused, true));
    }
    if request.method == Method::Post {
        match read_body(body, &limits).await {
            Ok(bytes) => request.body = bytes,
            Err(refused) => return Ok(to_http(refusal(&dashboard, refused, &limits), true)),
        }
    }
    let page = Arc::clone(&dashboard);
    let response =
        match tokio::task::spawn_blocking(move || crate::routes::handle(&page, &request)).await {
            Ok(response) => response,
            Err(e) => {
                log::error!("dashboard: a page failed to render: {e}");
                routes::page(
                    500,
                    pages::layout::message(
                        &pages::Ctx::new(&dashboard),
                        "Error",
                        "This page failed (a defect in the dashboard; see its log).",
                    ),
                )
            }
        };
    Ok(to_http(response, false))
}

/// The dashboard's view of a request's head.
fn request_of(head: &hyper::http::request::Parts) -> Request {
    let method = match head.method {
        hyper::Method::GET | hyper::Method::HEAD => Method::Get,
        hyper::Method::POST => Method::Post,
        _ => Method::Other,
    };
    let path = head
        .uri
        .path_and_query()
        .map_or_else(|| "/".to_owned(), |p| p.as_str().to_owned());
    // An absolute request target names the host; otherwise the Host header.
    let host = head
        .uri
        .authority()
        .map(|a| a.as_str().to_owned())
        .or_else(|| header(&head.headers, hyper::header::HOST));
    Request {
        method,
        path,
        host,
        origin: header(&head.headers, hyper::header::ORIGIN),
        referer: header(&head.headers, hyper::header::REFERER),
        cookie: joined(&head.headers, hyper::header::COOKIE),
        authorization: header(&head.headers, hyper::header::AUTHORIZATION),
        body: Vec::new(),
    }
}

/// The first value of `name`, if it is text.
fn header(headers: &HeaderMap, name: HeaderName) -> Option<String> {
    headers
        .get(name)
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned)
}

/// Every value of `name` joined with `; ` (a client may split cookies
/// over several headers).
fn joined(headers: &HeaderMap, name: HeaderName) -> Option<String> {
    let values: Vec<&str> = headers
        .get_all(name)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .collect();
    (!values.is_empty()).then(|| values.join("; "))
}

/// Why a body was not read.
#[derive(Debug)]
enum BodyRefusal {
    /// Larger than the limit (said by its length, or found reading it).
    TooLarge,
    /// Not all there within the body timeout.
    TooSlow,
    /// The connection broke or the framing was wrong.
    Broken(String),
}

/// Reads a body of at most `max_body_bytes` within `body_read_timeout`.
async fn read_body(body: Incoming, limits: &HttpLimits) -> Result<Vec<u8>, BodyRefusal> {
    let most = limits.max_body_bytes;
    if body.size_hint().lower() > most as u64 {
        return Err(BodyRefusal::TooLarge);
    }
    let read = tokio::time::timeout(limits.body_read_timeout, Limited::new(body, most).collect());
    match read.await {
        Err(_elapsed) => Err(BodyRefusal::TooSlow),
        Ok(Err(e)) if e.downcast_ref::<LengthLimitError>().is_some() => Err(BodyRefusal::TooLarge),
        Ok(Err(e)) => Err(BodyRefusal::Broken(e.to_string())),
        Ok(Ok(collected)) => Ok(collected.to_bytes().to_vec()),
    }
}

/// The answer to a body that was not read.
fn refusal(dashboard: &Dashboard, refused: BodyRefusal, limits: &HttpLimits) -> Response {
    let (status, text) = match refused {
        BodyRefusal::TooLarge => (
            413,
            format!(
                "This request's body is larger than the {} bytes a form here can be.",
                limits.max_body_bytes
            ),
        ),
        BodyRefusal::TooSlow => (
            408,
            format!(
                "This request's body did not arrive within {} s: send it again.",
                limits.body_read_timeout.as_secs_f64()
            ),
        ),
        BodyRefusal::Broken(why) => {
            log::debug!("dashboard: reading a request body: {why}");
            (
                400,
                format!("This request's body could not be read: {why}."),
            )
        }
    };
    let ctx = pages::Ctx::new(dashboard);
    routes::page(status, pages::layout::message(&ctx, "Refused", &text))
}

/// `response` for hyper; `close`: the connection is closed after it (its
/// request's body was not read to its end).
fn to_http(response: Response, close: bool) -> Answer {
    let mut http = hyper::Response::new(Full::new(Bytes::from(response.body)));
    *http.status_mut() = hyper::StatusCode::from_u16(response.status)
        .unwrap_or(hyper::StatusCode::INTERNAL_SERVER_ERROR);
    let headers = http.headers_mut();
    for (name, value) in response.headers {
        match (
            HeaderName::from_bytes(name.as_bytes()),
            HeaderValue::from_str(&value),
        ) {
            (Ok(name), Ok(value)) => {
                headers.append(name, value);
            }
            _ => log::warn!("dashboard: header {name} left out: not a valid header"),
        }
    }
    if close {
        headers.insert(hyper::header::CONNECTION, HeaderValue::from_static("close"));
    }
    http
}
