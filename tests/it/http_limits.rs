//! The project's HTTP servers (the dashboard's and a runner's metrics
//! endpoint) against slow and oversized clients: connections that send half
//! a header or promise a body and then nothing do not keep a normal client
//! from being answered while they are held; the timeouts close them; a body
//! or headers over the limit are refused without being read; with an
//! access token, a request without it is refused before its body is read.

use std::net::SocketAddr;
use std::time::Duration;

use jobqueue_core::{JobOptions, NewJob, enqueue_many};
use jobqueue_dashboard::{Dashboard, DashboardConfig, DashboardServer, HttpLimits, serve};
use jobqueue_runner::{MetricsLimits, Registry, Runner, RunnerConfig};
use jobqueue_tests::TestDb;
use jobqueue_tests::jobs::Noop;
use jobqueue_tests::raw_http::{Held, PATIENCE, exchange};

/// Slow connections held at once (4 were enough to stop the old server).
const HELD: usize = 16;

/// Long enough that nothing held times out while a test looks.
const LONG: Duration = Duration::from_secs(300);

/// A body the dashboard accepts (under its 64 KiB) and waits for.
const ACCEPTED_BODY: usize = 60_000;

/// Short, for the tests that wait for the server to close.
const SHORT: Duration = Duration::from_millis(500);

fn dashboard(db: &TestDb, config: impl FnOnce(&mut DashboardConfig)) -> DashboardServer {
    let mut settings = DashboardConfig::new(&db.url);
    config(&mut settings);
    let dashboard = Dashboard::new(settings).expect("dashboard");
    serve(dashboard, "127.0.0.1:0".parse().expect("address")).expect("serve")
}

fn limits(header: Duration, body: Duration) -> HttpLimits {
    let mut limits = HttpLimits::default();
    limits.header_read_timeout = header;
    limits.body_read_timeout = body;
    limits
}

fn get(addr: SocketAddr, path: &str) -> String {
    format!("GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n")
}

/// Half a request: its line and one header, never ended.
fn half_header(addr: SocketAddr) -> String {
    format!("GET / HTTP/1.1\r\nHost: {addr}\r\nX-Slow: ")
}

/// A POST that promises `length` bytes of body and sends `sent` of them.
fn promised_body(addr: SocketAddr, path: &str, length: usize, sent: &str) -> String {
    format!(
        "POST {path} HTTP/1.1\r\nHost: {addr}\r\nContent-Type: \
         application/x-www-form-urlencoded\r\nContent-Length: {length}\r\n\r\n{sent}"
    )
}

/// A page asked for on a connection of its own while `held` are held
/// must come back (within [`PATIENCE`]: `exchange` fails the test if not).
fn answered_while_held(addr: SocketAddr, held: &[Held], path: &str) -> u16 {
    let status = exchange(addr, &get(addr, path)).status;
    let waiting = held.iter().filter(|h| h.is_waiting()).count();
    assert_eq!(waiting, held.len(), "the slow connections are still held");
    status
}

#[test]
fn slow_clients_do_not_keep_the_dashboard_from_answering() {
    let db = TestDb::new();
    let server = dashboard(&db, |c| c.http = limits(LONG, LONG));
    let addr = server.addr();
    let mut held = Vec::new();
    for _ in 0..HELD {
        held.push(Held::open(addr, half_header(addr).as_bytes()));
        held.push(Held::open(
            addr,
            promised_body(addr, "/queues/mail/pause", ACCEPTED_BODY, "csrf=").as_bytes(),
        ));
    }
    let started = std::time::Instant::now();
    assert_eq!(answered_while_held(addr, &held, "/"), 200);
    eprintln!(
        "GET / answered in {} ms with {} slow connections held",
        started.elapsed().as_millis(),
        held.len()
    );
    // And again: a second page, the held ones still held.
    assert_eq!(answered_while_held(addr, &held, "/jobs"), 200);
}

#[test]
fn the_dashboard_closes_connections_whose_request_does_not_come() {
    let db = TestDb::new();
    let server = dashboard(&db, |c| c.http = limits(SHORT, SHORT));
    let addr = server.addr();
    // Headers that never end: closed, no answer.
    let header = Held::open(addr, half_header(addr).as_bytes());
    // Nothing at all after connecting: closed too.
    let silent = Held::open(addr, b"");
    // A body that never comes: 408, then closed.
    let body = Held::open(
        addr,
        promised_body(addr, "/queues/mail/pause", ACCEPTED_BODY, "csrf=").as_bytes(),
    );
    let sent = header.read_to_close(PATIENCE);
    assert!(sent.is_empty() || sent.contains("408"), "{sent}");
    let sent = silent.read_to_close(PATIENCE);
    assert!(sent.is_empty() || sent.contains("408"), "{sent}");
    let sent = body.read_to_close(PATIENCE);
    assert!(sent.starts_with("HTTP/1.1 408"), "{sent}");
    assert!(sent.contains("did not arrive within"), "{sent}");
    // A kept-alive connection that goes quiet after an answer: closed.
    let mut idle = Held::open(
        addr,
        format!("GET /static/style.css HTTP/1.1\r\nHost: {addr}\r\n\r\n").as_bytes(),
    );
    assert_eq!(idle.response(PATIENCE).status, 200);
    idle.read_to_close(PATIENCE);
}

#[test]
fn oversized_requests_are_refused_without_being_read() {
    let db = TestDb::new();
    let server = dashboard(&db, |c| c.http = limits(LONG, LONG));
    let addr = server.addr();
    // A declared length over the limit: 413 at once, though none of the
    // body was sent, and the connection closed.
    let mut big = Held::open(
        addr,
        promised_body(addr, "/queues/mail/pause", 10_000_000, "").as_bytes(),
    );
    let refused = big.response(PATIENCE);
    assert_eq!(refused.status, 413, "{}", refused.body);
    assert!(refused.body.contains("larger than"), "{}", refused.body);
    big.read_to_close(PATIENCE);
    // A chunked body that grows past the limit: 413 when it does (a
    // chunk of 128 KiB announced, one byte past the limit sent).
    let over = HttpLimits::default().max_body_bytes + 1;
    let mut chunked = Held::open(
        addr,
        format!(
            "POST /queues/mail/pause HTTP/1.1\r\nHost: {addr}\r\nTransfer-Encoding: \
             chunked\r\n\r\n20000\r\n{}",
            "x".repeat(over)
        )
        .as_bytes(),
    );
    assert_eq!(chunked.response(PATIENCE).status, 413);
    // Headers over the limit: 431.
    let huge = format!(
        "GET / HTTP/1.1\r\nHost: {addr}\r\nX-Big: {}\r\n\r\n",
        "y".repeat(17 * 1024)
    );
    let mut headers = Held::open(addr, huge.as_bytes());
    assert_eq!(headers.response(PATIENCE).status, 431);
    // The server still answers.
    assert_eq!(exchange(addr, &get(addr, "/")).status, 200);
}

#[test]
fn without_the_token_a_body_is_refused_before_it_is_read() {
    let db = TestDb::new();
    let server = dashboard(&db, |c| {
        c.access_token = Some("a-long-enough-secret".into());
        c.http = limits(LONG, LONG);
    });
    let addr = server.addr();
    // A body promised, none sent (over the limit, or under it): the 401
    // comes at once, and the connection is closed rather than its body read.
    for length in [100_000, ACCEPTED_BODY] {
        let mut unsigned = Held::open(
            addr,
            promised_body(addr, "/queues/mail/pause", length, "").as_bytes(),
        );
        let refused = unsigned.response(PATIENCE);
        assert_eq!(refused.status, 401, "{}", refused.body);
        assert_eq!(refused.header("connection"), Some("close"));
        unsigned.read_to_close(PATIENCE);
    }
    // With the token, the same request waits for its body.
    let signed = format!(
        "POST /queues/mail/pause HTTP/1.1\r\nHost: {addr}\r\nAuthorization: Bearer \
         a-long-enough-secret\r\nContent-Length: {ACCEPTED_BODY}\r\n\r\n"
    );
    let mut waiting = Held::open(addr, signed.as_bytes());
    assert_eq!(
        exchange(
            addr,
            &format!(
                "GET / HTTP/1.1\r\nHost: {addr}\r\nAuthorization: Bearer \
                 a-long-enough-secret\r\nConnection: close\r\n\r\n"
            )
        )
        .status,
        200
    );
    assert!(waiting.is_waiting(), "the signed request's body is awaited");
    // When it comes, it is read: a form without a valid CSRF token.
    let form = format!("csrf=wrong&pad={}", "p".repeat(ACCEPTED_BODY - 15));
    assert_eq!(form.len(), ACCEPTED_BODY);
    assert!(waiting.send(form.as_bytes()));
    let answered = waiting.response(PATIENCE);
    assert_eq!(answered.status, 403, "{}", answered.body);
    assert!(answered.body.contains("CSRF"), "{}", answered.body);
}

/// A runner in this process serving its metrics on a port of its own.
fn metrics_runner(
    db: &TestDb,
    header_timeout: Duration,
) -> (jobqueue_runner::RunnerHandle, SocketAddr) {
    let port = jobqueue_tools::postgres::free_port().expect("a free port");
    let addr: SocketAddr = format!("127.0.0.1:{port}").parse().expect("address");
    let config = RunnerConfig::new(&db.url).serve_metrics(addr);
    let mut limits = MetricsLimits::default();
    limits.header_read_timeout = header_timeout;
    let runner = Runner::new(config, Registry::new().register::<Noop>())
        .metrics_limits(limits)
        .start()
        .expect("start");
    (runner, addr)
}

fn scrape(addr: SocketAddr) -> String {
    let got = exchange(addr, &get(addr, "/metrics"));
    assert_eq!(got.status, 200, "{}", got.body);
    got.body
}

#[test]
fn a_stalled_scrape_does_not_hold_the_metrics_endpoint() {
    let (db, mut conn) = TestDb::connected();
    let job = NewJob::new("test.noop", "{}", JobOptions::new()).expect("job");
    enqueue_many(&mut conn, &[job]).expect("enqueue");
    let (runner, addr) = metrics_runner(&db, LONG);
    let mut held = Vec::new();
    for _ in 0..HELD {
        held.push(Held::open(
            addr,
            format!("GET /metrics HTTP/1.1\r\nHost: {addr}\r\nX-Slow: ").as_bytes(),
        ));
        held.push(Held::open(
            addr,
            format!("POST /metrics HTTP/1.1\r\nHost: {addr}\r\nContent-Length: 100000\r\n\r\n")
                .as_bytes(),
        ));
    }
    let page = scrape(addr);
    assert!(page.contains("jobqueue_workers"), "{page}");
    // The POSTs got their 404 without their bodies being read; the half
    // headers are still held.
    for (i, slow) in held.into_iter().enumerate() {
        if i % 2 == 1 {
            let sent = slow.read_to_close(PATIENCE);
            assert!(sent.starts_with("HTTP/1.1 404"), "{sent}");
        } else {
            assert!(slow.is_waiting());
        }
    }
    assert!(scrape(addr).contains("jobqueue_workers"));
    runner.shutdown();
}

#[test]
fn the_metrics_endpoint_closes_a_scrape_that_does_not_come() {
    let db = TestDb::new();
    let (runner, addr) = metrics_runner(&db, SHORT);
    let half = Held::open(
        addr,
        format!("GET /metrics HTTP/1.1\r\nHost: {addr}\r\nX-Slow: ").as_bytes(),
    );
    let sent = half.read_to_close(PATIENCE);
    assert!(sent.is_empty(), "{sent}");
    let huge = format!(
        "GET /metrics HTTP/1.1\r\nHost: {addr}\r\nX-Big: {}\r\n\r\n",
        "y".repeat(17 * 1024)
    );
    assert_eq!(
        Held::open(addr, huge.as_bytes()).response(PATIENCE).status,
        431
    );
    assert!(scrape(addr).contains("jobqueue_workers"));
    runner.shutdown();
}

#[test]
fn a_request_line_that_is_not_text_gets_400_not_a_dropped_connection() {
    let db = TestDb::new();
    let server = dashboard(&db, |_| {});
    let addr = server.addr();
    let mut request = b"GET /jobs?q=\xff\xfe HTTP/1.1\r\nHost: ".to_vec();
    request.extend_from_slice(format!("{addr}\r\nConnection: close\r\n\r\n").as_bytes());
    let answer = Held::open(addr, &request).response(PATIENCE);
    assert_eq!(answer.status, 400, "{}", answer.head);
    let mut nul = b"GET /jobs?key=a%00b HTTP/1.1\r\nHost: ".to_vec();
    nul.extend_from_slice(format!("{addr}\r\nConnection: close\r\n\r\n").as_bytes());
    assert_eq!(Held::open(addr, &nul).response(PATIENCE).status, 400);
}
