//! The async example service (`examples/async_signup.rs`) as a process:
//! a signup's user and welcome job commit together and the job runs in
//! the same process; a request that fails after its enqueue keeps neither;
//! SIGTERM stops the server and the runner, and the process exits 0.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};

use jobqueue_tests::example::{example_binary, stdout_lines};
use jobqueue_tests::raw_http::{RawResponse, exchange, form};
use jobqueue_tests::{TestDb, WAIT_LIMIT, count_where, poll_until, scalar, wait_for};

/// The example running on a database, killed when dropped (if still
/// running). Its stdout is read line by line on a thread of its own (the
/// first line is the bound address); its stderr goes to a file.
struct Service {
    child: Child,
    addr: SocketAddr,
    /// Where its stderr goes (removed when dropped).
    stderr: PathBuf,
}

impl Service {
    fn start(url: &str) -> Self {
        let stderr = std::env::temp_dir().join(format!(
            "jobqueue-async-signup-{}-{:08x}.stderr",
            std::process::id(),
            fastrand::u32(..)
        ));
        let mut child = Command::new(example_binary("async_signup"))
            .args(["--listen", "127.0.0.1:0"])
            .env("DATABASE_URL", url)
            .env("RUST_LOG", "warn")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(std::fs::File::create(&stderr).expect("create the stderr file"))
            .spawn()
            .expect("start the example");
        let first = stdout_lines(&mut child);
        let line = first.recv_timeout(WAIT_LIMIT).unwrap_or_else(|e| {
            panic!(
                "no address from the example ({e}); stderr:\n{}",
                std::fs::read_to_string(&stderr).unwrap_or_default()
            )
        });
        let addr = line
            .strip_prefix("listening on ")
            .and_then(|addr| addr.parse().ok())
            .unwrap_or_else(|| panic!("not an address line: {line:?}"));
        Service {
            child,
            addr,
            stderr,
        }
    }

    /// `POST /signup{query}` with the form `email=...`.
    fn signup(&self, query: &str, email: &str) -> RawResponse {
        let body = form(&[("email", email)]);
        exchange(
            self.addr,
            &format!(
                "POST /signup{query} HTTP/1.1\r\nHost: localhost\r\n\
                 Content-Type: application/x-www-form-urlencoded\r\n\
                 Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
                body.len()
            ),
        )
    }

    fn stderr(&self) -> String {
        std::fs::read_to_string(&self.stderr).unwrap_or_default()
    }
}

impl Drop for Service {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_file(&self.stderr);
    }
}

/// Users whose row matches `condition`.
fn users_where(db: &TestDb, condition: &str) -> i64 {
    scalar(
        &mut db.conn(),
        &format!("SELECT count(*) AS n FROM users WHERE {condition}"),
    )
}

#[test]
fn signups_commit_with_their_job_fail_without_it_and_sigterm_stops_the_process() {
    let db = TestDb::new();
    let service = Service::start(&db.url);

    // Fails after its enqueue, as asked: neither the user nor the job stays.
    let asked = service.signup("?fail_after_enqueue=1", "b@example.com");
    assert_eq!(asked.status, 500, "{}", asked.body);

    let created = service.signup("", "a@example.com");
    assert_eq!(created.status, 201, "{}", created.body);
    let id: i64 = created
        .body
        .trim()
        .strip_prefix("user ")
        .and_then(|id| id.parse().ok())
        .unwrap_or_else(|| panic!("not a user id: {:?}", created.body));

    // The address taken: found at commit, after the enqueue; both roll back.
    let taken = service.signup("", "a@example.com");
    assert_eq!(taken.status, 409, "{}", taken.body);

    // The committed signup's job runs in the service's own runner.
    wait_for("the user welcomed", WAIT_LIMIT, || {
        users_where(&db, &format!("id = {id} AND welcomed")) == 1
    });
    let mut conn = db.conn();
    wait_for("its job completed", WAIT_LIMIT, || {
        count_where(&mut conn, "status = 'completed'") == 1
    });
    // Its is the only job (the completed rows are kept a day) and its user
    // the only user: the failed requests left nothing.
    assert_eq!(
        (
            count_where(&mut conn, "true"),
            count_where(
                &mut conn,
                &format!("job_type = 'email.welcome' AND payload->>'user_id' = '{id}'")
            ),
            users_where(&db, "true"),
        ),
        (1, 1, 1)
    );

    let mut service = service;
    let status = std::process::Command::new("kill")
        .args(["-TERM", &service.child.id().to_string()])
        .status()
        .expect("run kill");
    assert!(status.success());
    let mut exit = None;
    let exited = poll_until(WAIT_LIMIT, || {
        exit = service.child.try_wait().expect("wait for the example");
        exit.is_some()
    });
    assert!(exited, "the example still runs after SIGTERM");
    assert_eq!(
        exit.and_then(|status| status.code()),
        Some(0),
        "stderr:\n{}",
        service.stderr()
    );
}
