//! Browser tests: Debian's headless Chromium (`/usr/bin/chromium`, or the
//! binary the `CHROMIUM` environment variable names), driven over the
//! DevTools protocol by the `headless_chrome` crate, behind a small
//! synchronous API for tests.
//!
//! ```no_run
//! use jobqueue_tests::browser::Browser;
//!
//! let browser = Browser::start();
//! let tab = browser.new_tab();
//! tab.goto("http://127.0.0.1:8080/");
//! tab.fill("input[name=job_type]", "report");
//! tab.submit("form#enqueue");
//! assert_eq!(tab.text("h1"), "Enqueued");
//! tab.follow("a#queues");
//! let png = tab.screenshot("queues");
//! assert!(png.exists());
//! ```
//!
//! Every wait polls a condition in the page until it holds or the tab's
//! timeout ([`DEFAULT_TIMEOUT`] unless [`Tab::set_timeout`] says otherwise)
//! runs out; there are no fixed sleeps. A wait that times out panics naming
//! what it waited for and the page's URL, after saving a screenshot of the
//! page (its path is in the message).
//!
//! Selectors are CSS selectors, matched with `document.querySelector`: the
//! first element that matches is the one read or acted on.
//!
//! Screenshots go to `target/screenshots/<test name>/<name>.png` (the test
//! name is the test thread's, as libtest names it), for a person to look at
//! after the run; a test's folder is emptied when its first browser starts.
//!
//! Every JavaScript dialog (`alert`, `confirm`, `prompt`, `beforeunload`) a
//! page opens is recorded ([`Tab::dialogs`]) and dismissed at once, so a
//! dialog never blocks a test, and a test can assert that none fired.
//!
//! An XSS check puts a hostile string such as
//! `<script>window.__xss = 1; alert(1)</script>` where the page shows user
//! data, then asserts that [`Tab::text`] of the element is that string
//! verbatim (`textContent`: escaped markup reads back as the characters),
//! that no element came of it ([`Tab::count`] of `"#that-element *"` is 0),
//! that the flag is unset (`tab.eval("typeof window.__xss") == "undefined"`)
//! and that [`Tab::dialogs`] is empty (see `tests/it/browser_harness.rs`).
//!
//! Speed: each step is one or a few round trips to the browser, and
//! `headless_chrome` takes up to about 100 ms for one (its connection's
//! reader holds the socket in 100 ms reads; its issue #446), so the actions
//! here are single evaluations where they can be. Starting a browser and
//! its first tab takes about 0.7 s.
//!
//! Chromium runs with `--no-sandbox`: the tests run as root on CI, where the
//! sandbox refuses to start, and load only pages of the tests' own servers.

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use base64::Engine;
use headless_chrome::protocol::cdp::types::Event;
use headless_chrome::protocol::cdp::{Input, Page, Runtime};
use serde_json::Value;

/// How long a wait polls before it gives up, unless [`Tab::set_timeout`]
/// changes it.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(10);

/// The browser's window size, in CSS pixels. Headless Chromium keeps room
/// for a (not drawn) frame in it: pages see a viewport of 1280 × 657.
/// Screenshots capture the whole page, beyond the viewport too.
pub const WINDOW_SIZE: (u32, u32) = (1280, 800);

/// The Chromium binary used when `CHROMIUM` is not set.
pub const DEFAULT_CHROMIUM: &str = "/usr/bin/chromium";

/// How long the connection to the browser may stay silent before it is
/// considered dead (`headless_chrome` closes it then; its default, 30 s, is
/// too short for a test that spends a while on the database between two
/// steps). Also the longest one protocol call may take.
const IDLE_TIMEOUT: Duration = Duration::from_secs(120);

/// A headless Chromium of a test's own, killed (and its profile removed)
/// when dropped.
pub struct Browser {
    /// Dropped first (after `Browser`'s own `drop` has closed Chromium):
    /// kills it if it is still running.
    inner: headless_chrome::Browser,
    /// Dropped next: removes Chromium's profile and temporary files.
    _profile: ProfileDir,
    test: String,
    /// Whether [`Browser::new_tab`] has handed out the tab the browser
    /// opened at start.
    initial_taken: AtomicBool,
}

/// A folder of one browser's own, removed when dropped: Chromium's profile
/// (user data directory) in `profile/`, and its temporary files (`TMPDIR`)
/// in `tmp/`. `headless_chrome` can make a profile of its own, but removes
/// it only once, right after killing Chromium, while Chromium's other
/// processes may still be writing to it; and a killed Chromium leaves its
/// singleton-socket folder in the temporary folder. Both littered `/tmp`.
struct ProfileDir(PathBuf);

impl ProfileDir {
    fn new() -> Self {
        static COUNTER: AtomicU32 = AtomicU32::new(0);
        let path = std::env::temp_dir().join(format!(
            "jobqueue-chromium-{}-{}",
            std::process::id(),
            COUNTER.fetch_add(1, Ordering::Relaxed)
        ));
        // Left over from an earlier process of the same id, if anything.
        let _ = std::fs::remove_dir_all(&path);
        for sub in ["profile", "tmp"] {
            std::fs::create_dir_all(path.join(sub))
                .unwrap_or_else(|e| panic!("could not create {}: {e}", path.display()));
        }
        ProfileDir(path)
    }
}

impl Drop for ProfileDir {
    fn drop(&mut self) {
        // Chromium's helper processes outlive the main one by a moment.
        let mut last = None;
        let removed = crate::poll_until(Duration::from_secs(5), || {
            match std::fs::remove_dir_all(&self.0) {
                Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                    last = Some(e);
                    false
                }
                _ => true,
            }
        });
        if let (false, Some(e)) = (removed, last) {
            eprintln!("could not remove {}: {e}", self.0.display());
        }
    }
}

impl Drop for Browser {
    /// Closes Chromium through the protocol and waits (a moment) until it
    /// has exited, so that its helper processes are gone, and have stopped
    /// writing to its folder, before that is removed. `headless_chrome`
    /// then kills whatever is left.
    fn drop(&mut self) {
        let (Some(pid), Some(tab)) = (
            self.inner.get_process_id(),
            lock(self.inner.get_tabs()).first().cloned(),
        ) else {
            return;
        };
        if tab
            .call_method(headless_chrome::protocol::cdp::Browser::Close(None))
            .is_err()
        {
            return;
        }
        crate::poll_until(Duration::from_secs(2), || !is_running(pid));
    }
}

/// Whether process `pid` (a child of this one) is still running: it exists
/// and is not a zombie waiting to be reaped.
fn is_running(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|stat| {
        // `pid (name) state ...`; the name may hold spaces and parentheses.
        stat.rsplit_once(')')
            .is_some_and(|(_, rest)| !rest.trim_start().starts_with(['Z', 'X']))
    })
}

impl std::fmt::Debug for Browser {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Browser")
            .field("test", &self.test)
            .field("pid", &self.inner.get_process_id())
            .finish()
    }
}

impl Browser {
    /// Starts a headless Chromium for the current test (named after the
    /// test's thread). Panics, saying to run `scripts/setup`, if there is no
    /// Chromium at `CHROMIUM` or [`DEFAULT_CHROMIUM`].
    pub fn start() -> Self {
        Self::start_for(&current_test_name())
    }

    /// Like [`Browser::start`], with the test name that screenshots are
    /// filed under given (for code that runs off the test's thread).
    pub fn start_for(test: &str) -> Self {
        let path = chromium_path();
        let window = format!("--window-size={},{}", WINDOW_SIZE.0, WINDOW_SIZE.1);
        let args: Vec<&std::ffi::OsStr> = [
            window.as_str(),
            "--hide-scrollbars",
            "--mute-audio",
            "--no-default-browser-check",
            "--lang=en-US",
        ]
        .into_iter()
        .map(std::ffi::OsStr::new)
        .collect();
        let profile = ProfileDir::new();
        let options = headless_chrome::LaunchOptions::default_builder()
            .path(Some(path.clone()))
            .user_data_dir(Some(profile.0.join("profile")))
            .process_envs(Some(
                [(
                    "TMPDIR".to_string(),
                    profile.0.join("tmp").to_string_lossy().into_owned(),
                )]
                .into(),
            ))
            .headless(true)
            .sandbox(false)
            .args(args)
            .idle_browser_timeout(IDLE_TIMEOUT)
            .build()
            .expect("valid Chromium launch options");
        let inner = headless_chrome::Browser::new(options).unwrap_or_else(|e| {
            panic!(
                "could not start Chromium ({}): {e:#}; run scripts/setup to install it",
                path.display()
            )
        });
        let test = sanitize(test);
        clear_screenshots_once(&test);
        Browser {
            inner,
            _profile: profile,
            test,
            initial_taken: AtomicBool::new(false),
        }
    }

    /// A new tab, on `about:blank`: the first call gives the tab the
    /// browser opened at start (quicker than opening one), later ones open
    /// one each.
    pub fn new_tab(&self) -> Tab {
        let tab = self.initial_tab().unwrap_or_else(|| {
            self.inner
                .new_tab()
                .unwrap_or_else(|e| panic!("could not open a browser tab: {e:#}"))
        });
        let dialogs = Arc::new(Mutex::new(Vec::new()));
        let seen = Arc::clone(&dialogs);
        // The dialog handle holds the connection, not the tab: no cycle.
        let handle = tab.get_dialog();
        tab.add_event_listener(Arc::new(move |event: &Event| {
            if let Event::PageJavascriptDialogOpening(opening) = event {
                let kind = format!("{:?}", opening.params.Type).to_lowercase();
                lock(&seen).push(format!("{kind}: {}", opening.params.message));
                if let Err(e) = handle.dismiss() {
                    eprintln!("could not dismiss a {kind} dialog: {e:#}");
                }
            }
        }))
        .unwrap_or_else(|e| panic!("could not listen to the tab's events: {e:#}"));
        Tab {
            inner: tab,
            test: self.test.clone(),
            timeout: DEFAULT_TIMEOUT,
            dialogs,
        }
    }

    /// The tab Chromium opened at start, on the first call, once
    /// `headless_chrome` has attached to it (about 0.3 s after start, half
    /// the time a new tab takes); `None` on later calls, or if it does not
    /// come within a second.
    fn initial_tab(&self) -> Option<Arc<headless_chrome::Tab>> {
        if self.initial_taken.swap(true, Ordering::Relaxed) {
            return None;
        }
        let mut tab = None;
        crate::poll_until(Duration::from_secs(1), || {
            tab = lock(self.inner.get_tabs()).first().cloned();
            tab.is_some()
        });
        tab
    }

    /// The Chromium version string (`Chrome/…`), for diagnostics.
    pub fn version(&self) -> String {
        self.inner
            .get_version()
            .map(|v| v.product)
            .unwrap_or_else(|e| panic!("could not ask Chromium its version: {e:#}"))
    }
}

/// One browser tab: navigation, waits, reading the page, acting on it,
/// screenshots. Every method panics with a clear message when it cannot do
/// what it says (tests want a failure, not an error to handle).
pub struct Tab {
    inner: Arc<headless_chrome::Tab>,
    test: String,
    timeout: Duration,
    dialogs: Arc<Mutex<Vec<String>>>,
}

impl std::fmt::Debug for Tab {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tab")
            .field("test", &self.test)
            .field("timeout", &self.timeout)
            .finish()
    }
}

impl Tab {
    /// Sets how long this tab's waits poll before they give up.
    pub fn set_timeout(&mut self, timeout: Duration) -> &mut Self {
        self.timeout = timeout;
        self
    }

    /// Loads `url` and waits until the new page has loaded
    /// (`document.readyState` is `complete`). Panics if the browser cannot
    /// load it (a refused connection, say); an HTTP error status is a page
    /// like any other. (A URL that differs from the current one only in its
    /// `#fragment` loads no new page, so this would time out on it.)
    pub fn goto(&self, url: &str) -> &Self {
        let token = new_token();
        // A page between two documents may refuse; its next one is new anyway.
        let _ = self.try_eval(&format!("window.__jqDocument = {}", js_string(&token)));
        let navigated = self
            .inner
            .call_method(Page::Navigate {
                url: url.to_string(),
                referrer: None,
                transition_Type: None,
                frame_id: None,
                referrer_policy: None,
            })
            .unwrap_or_else(|e| panic!("could not navigate to {url}: {e:#}"));
        if let Some(error) = navigated.error_text {
            panic!("could not load {url}: {error}");
        }
        self.wait_new_document(&token, &format!("{url} to load"));
        self
    }

    /// The current page's URL (`location.href`).
    pub fn url(&self) -> String {
        self.eval_string("location.href")
    }

    /// The current page's title.
    pub fn title(&self) -> String {
        self.eval_string("document.title")
    }

    /// Waits until an element matches `selector`.
    pub fn wait_for(&self, selector: &str) -> &Self {
        self.poll(
            &format!("an element matching `{selector}`"),
            &format!("{} return {{ok: true}};", find(selector)),
        );
        self
    }

    /// Waits until the first element matching `selector` exists and its
    /// text (`textContent`) contains `needle`.
    pub fn wait_for_text(&self, selector: &str, needle: &str) -> &Self {
        self.poll(
            &format!("`{selector}` to contain {needle:?}"),
            &format!(
                "{} return el.textContent.includes({}) ? {{ok: true}} \
                 : {{wait: 'its text is ' + JSON.stringify(el.textContent)}};",
                find(selector),
                js_string(needle)
            ),
        );
        self
    }

    /// Waits until the JavaScript expression `condition` is truthy in the
    /// page; `what` names the condition in the panic message if it never
    /// is. An expression that throws counts as not yet true (the page may
    /// be between two documents).
    pub fn wait_until(&self, what: &str, condition: &str) -> &Self {
        self.poll(
            what,
            &format!("return ({condition}) ? {{ok: true}} : {{wait: 'it is false'}};"),
        );
        self
    }

    /// Whether an element matches `selector` now (no waiting).
    pub fn exists(&self, selector: &str) -> bool {
        self.count(selector) > 0
    }

    /// How many elements match `selector` now (no waiting).
    pub fn count(&self, selector: &str) -> usize {
        let n = self.eval(&format!(
            "document.querySelectorAll({}).length",
            js_string(selector)
        ));
        n.as_u64()
            .and_then(|n| usize::try_from(n).ok())
            .unwrap_or_else(|| panic!("querySelectorAll({selector}).length gave {n}"))
    }

    /// The text (`textContent`: markup in it shows as the characters a
    /// person reads, never as elements) of the first element matching
    /// `selector`, once there is one.
    pub fn text(&self, selector: &str) -> String {
        let text = self.poll(
            &format!("an element matching `{selector}`"),
            &format!("{} return {{ok: el.textContent}};", find(selector)),
        );
        as_string(text)
    }

    /// The texts (`textContent`) of every element matching `selector` now,
    /// in document order (no waiting).
    pub fn texts(&self, selector: &str) -> Vec<String> {
        let texts = self.eval(&format!(
            "Array.from(document.querySelectorAll({}), el => el.textContent)",
            js_string(selector)
        ));
        serde_json::from_value(texts).expect("a list of strings")
    }

    /// The whole page's text as rendered for a person (`innerText` of the
    /// body: hidden elements left out, block elements on lines of their own).
    pub fn page_text(&self) -> String {
        self.eval_string("document.body ? document.body.innerText : ''")
    }

    /// The page's current markup as the browser parsed it (its DOM, not
    /// the bytes the server sent).
    pub fn html(&self) -> String {
        self.eval_string("document.documentElement.outerHTML")
    }

    /// Attribute `name` of the first element matching `selector`, once
    /// there is one; `None` if it has no such attribute.
    pub fn attribute(&self, selector: &str, name: &str) -> Option<String> {
        let value = self.poll(
            &format!("an element matching `{selector}`"),
            &format!(
                "{} return {{ok: el.getAttribute({})}};",
                find(selector),
                js_string(name)
            ),
        );
        value.as_str().map(str::to_string)
    }

    /// The current value of the form field matching `selector`, once there
    /// is one.
    pub fn value(&self, selector: &str) -> String {
        let value = self.poll(
            &format!("an element matching `{selector}`"),
            &format!("{} return {{ok: String(el.value)}};", find(selector)),
        );
        as_string(value)
    }

    /// Clicks the first element matching `selector` with the mouse, at its
    /// middle, once it is there, visible and not covered by another element
    /// (scrolled into view first). Does not wait for what the click does:
    /// [`Tab::follow`] does, for a click that loads a new page.
    pub fn click(&self, selector: &str) -> &Self {
        self.click_marking(selector, None);
        self
    }

    /// Clicks the first element matching `selector` (as [`Tab::click`]) and
    /// waits until the page that click loads has loaded (a link, a submit
    /// button).
    pub fn follow(&self, selector: &str) -> &Self {
        let token = new_token();
        self.click_marking(selector, Some(&token));
        self.wait_new_document(&token, &format!("a new page after clicking `{selector}`"));
        self
    }

    /// Sets the form field matching `selector` to `text`, once it is there
    /// and enabled: focuses it, replaces its value and fires `input` and
    /// `change` as typing would (no key events). For a `<select>`, chooses
    /// the option whose value is `text`.
    pub fn fill(&self, selector: &str, text: &str) -> &Self {
        let value = js_string(text);
        let now = self.poll(
            &format!("`{selector}` to be fillable"),
            &format!(
                "{}
                if (!('value' in el) || el.tagName === 'BUTTON')
                    return {{error: 'it is not a form field: ' + el.outerHTML.slice(0, 120)}};
                if (el.disabled) return {{wait: 'it is disabled'}};
                if (el.readOnly) return {{wait: 'it is read-only'}};
                if (el.tagName === 'SELECT' && !Array.from(el.options).some(o => o.value === {value}))
                    return {{error: 'it has no option of value ' + {value}}};
                el.focus();
                el.value = {value};
                el.dispatchEvent(new Event('input', {{bubbles: true}}));
                el.dispatchEvent(new Event('change', {{bubbles: true}}));
                return {{ok: String(el.value)}};",
                find(selector)
            ),
        );
        assert_eq!(
            now, text,
            "filled `{selector}` with {text:?}, and it holds {now}"
        );
        self
    }

    /// Submits the form matching `selector` (as its submit button would:
    /// validation and `submit` handlers run) and waits until the page it
    /// loads has loaded. Panics at once if the form fails its own
    /// validation (a `required` field left empty, say).
    pub fn submit(&self, selector: &str) -> &Self {
        let token = new_token();
        self.poll(
            &format!("`{selector}` to submit"),
            &format!(
                "{}
                if (!(el instanceof HTMLFormElement))
                    return {{error: 'it is not a form: ' + el.outerHTML.slice(0, 120)}};
                const invalid = Array.from(el.elements).filter(f => f.willValidate && !f.checkValidity());
                if (invalid.length > 0)
                    return {{error: 'it fails its own validation: ' + invalid.map(f =>
                        (f.name || f.id || f.tagName) + ': ' + f.validationMessage).join('; ')}};
                window.__jqDocument = {};
                el.requestSubmit();
                return {{ok: true}};",
                find(selector),
                js_string(&token)
            ),
        );
        self.wait_new_document(&token, &format!("the page `{selector}` submits to"));
        self
    }

    /// Evaluates the JavaScript expression in the page and returns its value
    /// as JSON (`undefined` as `null`; a promise is awaited). Panics with
    /// the exception if it throws.
    pub fn eval(&self, expression: &str) -> Value {
        self.try_eval(expression)
            .unwrap_or_else(|e| panic!("JavaScript `{expression}` failed: {e}"))
    }

    /// Like [`Tab::eval`], for an expression whose value is a string.
    pub fn eval_string(&self, expression: &str) -> String {
        match self.eval(expression) {
            Value::String(s) => s,
            other => panic!("JavaScript `{expression}` gave {other}, not a string"),
        }
    }

    /// Saves a PNG of the whole page (beyond the window too) as
    /// `target/screenshots/<test name>/<name>.png` and returns its path.
    pub fn screenshot(&self, name: &str) -> PathBuf {
        let path = screenshot_dir(&self.test).join(format!("{}.png", sanitize(name)));
        if let Err(e) = self.try_screenshot(&path) {
            panic!("could not save screenshot {}: {e}", path.display());
        }
        path
    }

    /// The JavaScript dialogs the pages of this tab have opened so far, in
    /// order, each as `"<kind>: <message>"` (`"alert: 1"`). Each was
    /// dismissed when it opened.
    pub fn dialogs(&self) -> Vec<String> {
        lock(&self.dialogs).clone()
    }

    /// The underlying `headless_chrome` tab, for what this API lacks.
    pub fn raw(&self) -> &headless_chrome::Tab {
        &self.inner
    }

    /// Evaluates `body`, the body of a JavaScript function, until it
    /// returns `{ok: value}`, and returns that value. `{wait: reason}` (or
    /// an exception) means not yet: past the timeout, this panics naming
    /// `what` and the last reason. `{error: message}` panics at once.
    ///
    /// Each evaluation is one round trip to the browser; `headless_chrome`
    /// takes about 100 ms for one (its connection's reader holds the socket
    /// in 100 ms reads), so each action is one evaluation where it can be.
    fn poll(&self, what: &str, body: &str) -> Value {
        let expression = format!("(() => {{ {body} }})()");
        let (mut found, mut why) = (None, String::new());
        crate::poll_until(self.timeout, || {
            why = match self.try_eval(&expression) {
                Ok(Value::Object(mut answer)) => {
                    if let Some(value) = answer.remove("ok") {
                        found = Some(value);
                        return true;
                    }
                    if let Some(error) = answer.remove("error") {
                        self.fail(&format!(
                            "cannot wait for {what}: {}",
                            error.as_str().unwrap_or_default()
                        ));
                    }
                    answer
                        .remove("wait")
                        .and_then(|w| w.as_str().map(str::to_string))
                        .unwrap_or_default()
                }
                Ok(other) => format!("unexpected answer {other}"),
                Err(e) => e,
            };
            false
        });
        found.unwrap_or_else(|| {
            self.fail(&format!(
                "timed out after {:?} waiting for {what}: {why}",
                self.timeout
            ))
        })
    }

    /// Clicks `selector` as [`Tab::click`] does; tags its document with
    /// `token` first if given (see [`Tab::wait_new_document`]).
    fn click_marking(&self, selector: &str, token: Option<&str>) {
        let mark = token.map_or(String::new(), |t| {
            format!("window.__jqDocument = {};", js_string(t))
        });
        // Scrolls the element into view; gives its middle if that point
        // hits it, else why not.
        let xy = self.poll(
            &format!("`{selector}` to be clickable"),
            &format!(
                "{}
                el.scrollIntoView({{block: 'center', inline: 'center'}});
                const r = el.getBoundingClientRect();
                if (r.width === 0 || r.height === 0) return {{wait: 'it is not visible'}};
                const x = r.left + r.width / 2, y = r.top + r.height / 2;
                const hit = document.elementFromPoint(x, y);
                if (hit === null || !(hit === el || el.contains(hit)))
                    return {{wait: 'it is covered by ' + (hit ? hit.outerHTML.slice(0, 120) : 'nothing')}};
                {mark}
                return {{ok: [x, y]}};",
                find(selector)
            ),
        );
        let coordinate = |i: usize| xy.get(i).and_then(Value::as_f64).unwrap_or_default();
        let (x, y) = (coordinate(0), coordinate(1));
        for kind in [
            Input::DispatchMouseEventTypeOption::MousePressed,
            Input::DispatchMouseEventTypeOption::MouseReleased,
        ] {
            self.inner
                .call_method(Input::DispatchMouseEvent {
                    Type: kind,
                    x,
                    y,
                    modifiers: None,
                    timestamp: None,
                    button: Some(Input::MouseButton::Left),
                    buttons: None,
                    click_count: Some(1),
                    force: None,
                    tangential_pressure: None,
                    tilt_x: None,
                    tilt_y: None,
                    twist: None,
                    delta_x: None,
                    delta_y: None,
                    pointer_Type: None,
                })
                .unwrap_or_else(|e| panic!("could not click `{selector}`: {e:#}"));
        }
    }

    fn try_eval(&self, expression: &str) -> Result<Value, String> {
        let evaluated = self
            .inner
            .call_method(Runtime::Evaluate {
                expression: expression.to_string(),
                object_group: None,
                include_command_line_api: None,
                silent: Some(true),
                context_id: None,
                return_by_value: Some(true),
                generate_preview: None,
                user_gesture: Some(true),
                await_promise: Some(true),
                throw_on_side_effect: None,
                timeout: None,
                disable_breaks: None,
                repl_mode: None,
                allow_unsafe_eval_blocked_by_csp: None,
                unique_context_id: None,
                serialization_options: None,
            })
            .map_err(|e| format!("{e:#}"))?;
        if let Some(details) = evaluated.exception_details {
            let message = details
                .exception
                .and_then(|e| e.description)
                .unwrap_or(details.text);
            return Err(message);
        }
        Ok(evaluated.result.value.unwrap_or(Value::Null))
    }

    /// Waits until the tab shows a document other than the one tagged
    /// `token` (in a window property, which a new document does not have)
    /// and that document has loaded.
    fn wait_new_document(&self, token: &str, what: &str) {
        self.poll(
            what,
            &format!(
                "if (window.__jqDocument === {}) return {{wait: 'the old page is still there'}};
                if (document.readyState !== 'complete')
                    return {{wait: 'the new page is ' + document.readyState}};
                return {{ok: true}};",
                js_string(token)
            ),
        );
    }

    fn try_screenshot(&self, path: &Path) -> Result<(), String> {
        let size = self.try_eval(
            "[Math.max(document.documentElement.scrollWidth, window.innerWidth), \
              Math.max(document.documentElement.scrollHeight, window.innerHeight)]",
        )?;
        let dimension = |i: usize| size.get(i).and_then(Value::as_f64).unwrap_or(0.0);
        let (width, height) = (dimension(0), dimension(1));
        let clip = (width > 0.0 && height > 0.0).then_some(Page::Viewport {
            x: 0.0,
            y: 0.0,
            width,
            height,
            scale: 1.0,
        });
        let data = self
            .inner
            .call_method(Page::CaptureScreenshot {
                format: Some(Page::CaptureScreenshotFormatOption::Png),
                quality: None,
                clip,
                from_surface: Some(true),
                capture_beyond_viewport: Some(true),
                optimize_for_speed: None,
            })
            .map_err(|e| format!("{e:#}"))?
            .data;
        let png = base64::engine::general_purpose::STANDARD
            .decode(data)
            .map_err(|e| e.to_string())?;
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir).map_err(|e| e.to_string())?;
        }
        std::fs::write(path, png).map_err(|e| e.to_string())
    }

    /// Panics with `message`, the page's URL and the path of a screenshot
    /// of it (taken here, if the page still answers).
    fn fail(&self, message: &str) -> ! {
        let url = self
            .try_eval("location.href")
            .ok()
            .and_then(|v| v.as_str().map(str::to_string))
            .unwrap_or_else(|| "(unknown)".to_string());
        static FAILURES: AtomicU32 = AtomicU32::new(0);
        let n = FAILURES.fetch_add(1, Ordering::Relaxed);
        let path = screenshot_dir(&self.test).join(format!("failure-{n}.png"));
        let shot = match self.try_screenshot(&path) {
            Ok(()) => format!("screenshot: {}", path.display()),
            Err(e) => format!("no screenshot: {e}"),
        };
        panic!("{message}, on {url} ({shot})");
    }
}

/// The Chromium binary: `CHROMIUM` if set, else [`DEFAULT_CHROMIUM`].
/// Panics, saying to run `scripts/setup`, if it does not exist.
pub fn chromium_path() -> PathBuf {
    let path = std::env::var_os("CHROMIUM")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(DEFAULT_CHROMIUM));
    assert!(
        path.is_file(),
        "no Chromium at {} (the browser tests need it): run scripts/setup to \
         install Debian's `chromium`, or set CHROMIUM to a Chromium binary",
        path.display()
    );
    path
}

/// The folder a test's screenshots go to:
/// `<target dir>/screenshots/<test name>`, under `CARGO_TARGET_DIR` if
/// set, else this workspace's `target/`.
pub fn screenshot_dir(test: &str) -> PathBuf {
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/target")));
    let target = if target.is_relative() {
        Path::new(env!("CARGO_MANIFEST_DIR")).join(target)
    } else {
        target
    };
    target.join("screenshots").join(sanitize(test))
}

/// The current test's name, as libtest names its thread (`module::test`),
/// or `main` off a named thread.
fn current_test_name() -> String {
    std::thread::current().name().unwrap_or("main").to_string()
}

/// A name fit for one path component: `::` becomes `-`, anything but
/// letters, digits, `-`, `_` and `.` becomes `_`.
fn sanitize(name: &str) -> String {
    let name = name.replace("::", "-");
    let clean: String = name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.') {
                c
            } else {
                '_'
            }
        })
        .collect();
    match clean.trim_matches('.') {
        "" => "unnamed".to_string(),
        trimmed => trimmed.to_string(),
    }
}

/// Empties the test's screenshot folder the first time a browser starts
/// for it in this process, so that no file there is from an earlier run.
fn clear_screenshots_once(test: &str) {
    static CLEARED: OnceLock<Mutex<HashSet<String>>> = OnceLock::new();
    let first = lock(CLEARED.get_or_init(Default::default)).insert(test.to_string());
    if first {
        let dir = screenshot_dir(test);
        if let Err(e) = std::fs::remove_dir_all(&dir)
            && e.kind() != std::io::ErrorKind::NotFound
        {
            panic!("could not empty {}: {e}", dir.display());
        }
    }
}

/// JavaScript that sets `el` to the first element matching `selector`, or
/// returns a `wait` answer (see `Tab::poll`) if none does.
fn find(selector: &str) -> String {
    format!(
        "const el = document.querySelector({}); if (el === null) return {{wait: 'no element matches'}};",
        js_string(selector)
    )
}

/// A fresh token to tag a document with.
fn new_token() -> String {
    format!("{:016x}", fastrand::u64(..))
}

/// A JSON string's text; panics on anything else.
fn as_string(value: Value) -> String {
    match value {
        Value::String(s) => s,
        other => panic!("expected a string from the page, got {other}"),
    }
}

/// `s` as a JavaScript string literal.
fn js_string(s: &str) -> String {
    serde_json::to_string(s).expect("a string serializes")
}

/// Locks `mutex`, through a poisoning panic (the data is plain lists).
fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}
