//! The browser harness (`jobqueue_tests::browser`) against a tiny web server
//! of the test's own: load a page, fill and POST a form, follow a link,
//! read text after each step, take a screenshot; markup that the server
//! escaped shows as text and runs no script, while the same markup
//! unescaped is caught; a wait that times out says what it waited for.

use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use jobqueue_tests::browser::{Browser, screenshot_dir};
use jobqueue_tests::wait_for;

/// Text that would run a script and open an alert if a page put it in its
/// markup unescaped. The pattern for the dashboard's XSS tests.
const HOSTILE: &str = "<script>window.__xss = 1; alert(1)</script>";

/// Text that would add an event handler if a page put it in a quoted
/// attribute unescaped.
const HOSTILE_ATTRIBUTE: &str = "x\" onmouseover=\"window.__xss = 2";

/// A web server on a free loopback port, serving [`respond`]'s pages on a
/// thread of its own until dropped; it keeps the form fields POSTed to it.
struct Site {
    base: String,
    server: Arc<tiny_http::Server>,
    posted: Arc<Mutex<Vec<String>>>,
    thread: Option<JoinHandle<()>>,
}

impl Site {
    fn start() -> Self {
        let server = Arc::new(tiny_http::Server::http("127.0.0.1:0").expect("bind a port"));
        let addr = server.server_addr().to_ip().expect("an IP address");
        let posted = Arc::new(Mutex::new(Vec::new()));
        let thread = std::thread::spawn({
            let server = Arc::clone(&server);
            let posted = Arc::clone(&posted);
            move || {
                // Ends when `unblock` is called (on drop).
                for mut request in server.incoming_requests() {
                    let mut body = String::new();
                    request
                        .as_reader()
                        .read_to_string(&mut body)
                        .expect("read the request body");
                    let (status, html) = respond(request.method(), request.url(), &body, &posted);
                    let response = tiny_http::Response::from_string(html)
                        .with_status_code(status)
                        .with_header(
                            "Content-Type: text/html; charset=utf-8"
                                .parse::<tiny_http::Header>()
                                .expect("a header"),
                        );
                    let _ = request.respond(response);
                }
            }
        });
        Site {
            base: format!("http://{addr}"),
            server,
            posted,
            thread: Some(thread),
        }
    }

    fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    fn posted(&self) -> Vec<String> {
        self.posted.lock().expect("posted").clone()
    }
}

impl Drop for Site {
    fn drop(&mut self) {
        self.server.unblock();
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// The site: `/` a page with a form, a link and a hostile string escaped;
/// POST `/enqueue` echoes the submitted job type (escaped); `/queues` a
/// second page; `/unsafe` the hostile string unescaped, and a button that
/// opens an alert.
fn respond(
    method: &tiny_http::Method,
    url: &str,
    body: &str,
    posted: &Mutex<Vec<String>>,
) -> (u16, String) {
    match (method, url) {
        (tiny_http::Method::Get, "/") => (
            200,
            page(
                "Jobs",
                &format!(
                    r#"<h1>Jobs</h1>
<p id="last-error" title="{}">{}</p>
<form id="enqueue" method="post" action="/enqueue">
  <label>Job type <input id="job-type" name="job_type" required></label>
  <label>Queue <select id="queue" name="queue">
    <option value="default">default</option><option value="mail">mail</option>
  </select></label>
  <button type="submit">Enqueue</button>
</form>
<p><a id="queues" href="/queues">Queues</a></p>"#,
                    escape(HOSTILE_ATTRIBUTE),
                    escape(HOSTILE)
                ),
            ),
        ),
        (tiny_http::Method::Post, "/enqueue") => {
            let job_type = form_field(body, "job_type").unwrap_or_default();
            let queue = form_field(body, "queue").unwrap_or_default();
            posted.lock().expect("posted").push(job_type.clone());
            (
                200,
                page(
                    "Enqueued",
                    &format!(
                        r#"<h1>Enqueued</h1>
<p id="flash">Enqueued {} on {}</p>
<p><a id="queues" href="/queues">Queues</a></p>"#,
                        escape(&job_type),
                        escape(&queue)
                    ),
                ),
            )
        }
        (tiny_http::Method::Get, "/queues") => (
            200,
            page(
                "Queues",
                r#"<h1>Queues</h1>
<table id="queues"><tr><th>Queue</th><th>Pending</th></tr>
<tr><td>default</td><td>1</td></tr><tr><td>mail</td><td>0</td></tr></table>"#,
            ),
        ),
        // What the checks must catch: the same string, not escaped.
        (tiny_http::Method::Get, "/unsafe") => (
            200,
            page(
                "Unsafe",
                &format!(
                    r#"<p id="last-error">{HOSTILE}</p>
<button id="probe" onclick="alert('probe'); document.title = 'after'">Probe</button>"#
                ),
            ),
        ),
        _ => (404, page("Not found", "<h1>Not found</h1>")),
    }
}

fn page(title: &str, body: &str) -> String {
    format!(
        "<!doctype html><html lang=en><head><meta charset=utf-8><title>{title}</title>\
         <style>body {{ font-family: sans-serif; margin: 2em }}</style></head>\
         <body>{body}</body></html>"
    )
}

/// HTML-escapes text for an element's content or an attribute value.
fn escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
        .replace('\'', "&#39;")
}

/// Field `name` of an `application/x-www-form-urlencoded` body.
fn form_field(body: &str, name: &str) -> Option<String> {
    body.split('&').find_map(|pair| {
        let (key, value) = pair.split_once('=')?;
        (key == name).then(|| percent_decode(value))
    })
}

fn percent_decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let escaped = bytes
            .get(i + 1..i + 3)
            .and_then(|hex| std::str::from_utf8(hex).ok())
            .and_then(|hex| u8::from_str_radix(hex, 16).ok());
        match (bytes[i], escaped) {
            (b'+', _) => out.push(b' '),
            (b'%', Some(byte)) => {
                out.push(byte);
                i += 2;
            }
            (byte, _) => out.push(byte),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[test]
fn form_post_and_link() {
    let started = Instant::now();
    let site = Site::start();
    let browser = Browser::start();
    let tab = browser.new_tab();

    tab.goto(&site.url("/"));
    assert_eq!(tab.title(), "Jobs");
    assert_eq!(tab.text("h1"), "Jobs");
    assert_eq!(tab.url(), site.url("/"));

    // Typed text with markup in it goes to the server as typed, and comes
    // back escaped: shown as text.
    tab.fill("#job-type", "report <daily> & more");
    tab.fill("#queue", "mail");
    assert_eq!(tab.value("#queue"), "mail");
    tab.submit("form#enqueue");
    assert_eq!(tab.url(), site.url("/enqueue"));
    assert_eq!(tab.text("h1"), "Enqueued");
    assert_eq!(tab.text("#flash"), "Enqueued report <daily> & more on mail");
    assert_eq!(site.posted(), ["report <daily> & more"]);
    assert!(tab.page_text().contains("Enqueued report <daily> & more"));

    tab.follow("a#queues");
    assert_eq!(tab.url(), site.url("/queues"));
    tab.wait_for_text("h1", "Queues");
    assert_eq!(tab.texts("#queues td"), ["default", "1", "mail", "0"]);

    let png = tab.screenshot("queues");
    assert_eq!(
        png,
        screenshot_dir("browser_harness::form_post_and_link").join("queues.png")
    );
    let bytes = std::fs::read(&png).unwrap_or_else(|e| panic!("read {}: {e}", png.display()));
    assert!(
        bytes.len() > 100,
        "{} is {} bytes",
        png.display(),
        bytes.len()
    );
    assert!(
        bytes.starts_with(b"\x89PNG\r\n\x1a\n"),
        "{} is not a PNG",
        png.display()
    );
    assert!(tab.dialogs().is_empty(), "dialogs: {:?}", tab.dialogs());
    eprintln!(
        "browser harness: {} in {:?}; screenshot {}",
        browser.version(),
        started.elapsed(),
        png.display()
    );
}

#[test]
fn escaped_markup_is_text_and_dialogs_are_seen() {
    let site = Site::start();
    let browser = Browser::start();
    let mut tab = browser.new_tab();

    // The XSS pattern: the hostile string shows as text, no element came of
    // it, its script never ran (no flag, no dialog).
    tab.goto(&site.url("/"));
    assert_eq!(tab.text("#last-error"), HOSTILE);
    assert_eq!(tab.count("#last-error *"), 0);
    assert!(!tab.html().contains(HOSTILE));
    assert_eq!(
        tab.attribute("#last-error", "title").as_deref(),
        Some(HOSTILE_ATTRIBUTE)
    );
    assert_eq!(tab.attribute("#last-error", "onmouseover"), None);
    assert_eq!(tab.eval("typeof window.__xss"), "undefined");
    assert_eq!(tab.dialogs(), Vec::<String>::new());
    tab.screenshot("escaped");

    // ... and these checks do catch the string unescaped: its script ran
    // (the flag is set) and its alert is recorded (and was dismissed, so
    // the page went on loading).
    tab.goto(&site.url("/unsafe"));
    assert_eq!(tab.count("#last-error script"), 1);
    assert_eq!(tab.eval("window.__xss"), 1);
    assert_eq!(tab.dialogs(), ["alert: 1"]);

    // A dialog a click opens is recorded too.
    tab.click("#probe");
    wait_for("the probe's alert", Duration::from_secs(10), || {
        tab.dialogs().len() == 2
    });
    assert_eq!(tab.dialogs(), ["alert: 1", "alert: probe"]);
    tab.wait_until("the click handler to finish", "document.title === 'after'");

    // A wait that times out names what it waited for and leaves a
    // screenshot of the page. (Its panic message shows in the test's
    // output, with --nocapture or if the test fails: that one is expected.)
    tab.set_timeout(Duration::from_millis(300));
    let failed = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        tab.wait_for("#nothing-here");
    }))
    .expect_err("a wait for a missing element fails");
    let message = failed.downcast_ref::<String>().cloned().unwrap_or_default();
    assert!(
        message.contains("timed out after 300ms waiting for an element matching `#nothing-here`"),
        "{message}"
    );
    assert!(message.contains(&site.url("/unsafe")), "{message}");
    let shot = message
        .split("screenshot: ")
        .nth(1)
        .and_then(|rest| rest.strip_suffix(')'))
        .unwrap_or_else(|| panic!("no screenshot path in: {message}"));
    assert!(std::path::Path::new(shot).is_file(), "{shot}");
}
