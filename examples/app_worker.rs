//! An application's own worker binary: its job types, derived, with their
//! handlers; the state they share (one HTTP client with its connection
//! pool, made once); and the `jobqueue` command line of `jobqueue-cli`
//! (migrate, work and the admin commands) in a few lines of `main`.
//!
//! ```sh
//! cargo run --example app_worker -- migrate
//! cargo run --example app_worker -- enqueue email.send '{"to": "a@example.com", "subject": "Hi"}'
//! cargo run --example app_worker -- enqueue webhook.deliver --payload-file event.json
//! cargo run --example app_worker -- enqueue uptime.check '{"addr": "example.com:443"}'
//! cargo run --example app_worker -- work --concurrency 4      # Ctrl-C to stop
//! cargo run --example app_worker -- stats
//! cargo run --example app_worker -- cron list
//! ```
//!
//! Its tests, at the end, use the testing kit (`jobqueue::testing`, the
//! front crate's `testing` feature): a sign-up enqueues one welcome email,
//! a webhook retries on 503 and fails for good on 410, the nightly schedule
//! enqueues this month's report. Each test that needs a database gets one
//! of its own, copied from a template migrated once, on the server
//! `DATABASE_URL` names (`DATABASE_URL=postgres://… cargo test --example
//! app_worker`; the project's `scripts/test` runs them).

use std::process::ExitCode;
use std::time::Duration;

use diesel::prelude::*;
use jobqueue::prelude::*;
use jobqueue::{JobRow, Lifecycle, Middleware, Missed, Next, Periodic, Registry};
use serde::{Deserialize, Serialize};

/// Sends an email (here: prints it).
#[derive(Debug, Serialize, Deserialize, Job)]
#[job(type = "email.send", priority = 150, queue = "mail", max_attempts = 5)]
struct SendEmail {
    to: String,
    subject: String,
}

impl Perform for SendEmail {
    fn perform(&self, ctx: &mut JobContext<'_>) -> Result<(), JobError> {
        if !self.to.contains('@') {
            return Err(JobError::fail(format!(
                "`{}` is not an email address",
                self.to
            )));
        }
        println!(
            "attempt {}: mail to {}: {}",
            ctx.attempt(),
            self.to,
            self.subject
        );
        Ok(())
    }
}

/// Posts an event to a subscriber's URL, through the worker's one HTTP
/// client (its connections are pooled and reused across jobs).
#[derive(Debug, Serialize, Deserialize, Job)]
#[job(
    type = "webhook.deliver",
    queue = "webhooks",
    max_attempts = 8,
    backoff_base_ms = 1000,
    backoff_max_secs = 600
)]
struct DeliverWebhook {
    url: String,
    event: serde_json::Value,
}

impl Perform for DeliverWebhook {
    const TIMEOUT: Option<Duration> = Some(Duration::from_secs(30));

    fn perform(&self, ctx: &mut JobContext<'_>) -> Result<(), JobError> {
        let http = ctx.state::<ureq::Agent>()?;
        let sent = http
            .post(&self.url)
            .header("content-type", "application/json")
            .send(self.event.to_string());
        match sent {
            Ok(_) => Ok(()),
            // The subscriber is gone: retrying cannot help.
            Err(ureq::Error::StatusCode(410)) => Err(JobError::fail(format!(
                "{} is gone (410): not retried",
                self.url
            ))),
            // A refused connection or a 5xx: `?` retries with the type's backoff.
            Err(e) => Err(e.into()),
        }
    }
}

/// Builds a report in stages, reporting progress, stopping when asked.
#[derive(Debug, Serialize, Deserialize, Job)]
#[job(type = "report.build", queue = "reports")]
struct BuildReport {
    month: String,
}

impl Perform for BuildReport {
    const TIMEOUT: Option<Duration> = Some(Duration::from_secs(600));

    fn perform(&self, ctx: &mut JobContext<'_>) -> Result<(), JobError> {
        for (percent, stage) in [
            (25, "query"),
            (50, "aggregate"),
            (75, "render"),
            (100, "upload"),
        ] {
            if ctx.is_cancelled() {
                return Err(JobError::Cancelled);
            }
            std::thread::sleep(Duration::from_millis(200));
            ctx.progress(percent, &format!("{stage} {}", self.month))?;
        }
        Ok(())
    }
}

/// Checks that a host accepts connections. Its handler is async: a
/// thousand checks waiting on slow hosts hold no worker thread, and one
/// past its timeout is dropped at its await.
#[derive(Debug, Serialize, Deserialize, Job)]
#[job(type = "uptime.check", queue = "uptime", max_attempts = 3)]
struct CheckUptime {
    addr: String,
}

impl AsyncPerform for CheckUptime {
    const TIMEOUT: Option<Duration> = Some(Duration::from_secs(10));

    async fn perform(&self, ctx: &mut JobContext<'_>) -> Result<(), JobError> {
        match tokio::net::TcpStream::connect(&self.addr).await {
            Ok(_) => ctx.progress(100, "up"),
            Err(e) => Err(JobError::Retry(format!("{} is down: {e}", self.addr))),
        }
    }
}

/// The web side's sign-up: the welcome email is enqueued in the sign-up's
/// own transaction, once per address. An application keeps it in the
/// library its web code and its worker share; here its tests call it.
#[cfg_attr(not(test), expect(dead_code, reason = "called by the tests only"))]
fn sign_up(conn: &mut PgConnection, email: &str) -> jobqueue::Result<()> {
    conn.transaction(|conn| {
        // ... the application's own writes (the user's row), then:
        SendEmail {
            to: email.into(),
            subject: "Welcome".into(),
        }
        .options()
        .unique_key(format!("welcome:{email}"))
        .tag("signup")
        .meta("source", "web")
        .enqueue(conn)?;
        Ok(())
    })
}

/// Around every attempt of every job: a failed attempt reported where an
/// application would call its error tracker.
struct ReportFailures;

impl Middleware for ReportFailures {
    fn around(&self, ctx: &mut JobContext<'_>, next: Next<'_>) -> Result<(), JobError> {
        let outcome = next.run(ctx);
        if let Err(error) = &outcome {
            eprintln!(
                "{} {} failed attempt {} of {}: {error}",
                ctx.job_type(),
                ctx.job_id(),
                ctx.attempt(),
                ctx.max_attempts()
            );
        }
        outcome
    }
}

/// Told of each job that failed for good, in the transaction that fails
/// it: where an application would page someone, or record the dead letter
/// in a table of its own through `conn` (committed with the failure).
struct AlertOnDeadLetter;

impl Lifecycle for AlertOnDeadLetter {
    fn failed(&self, job: &JobRow, _conn: &mut PgConnection) -> Result<(), String> {
        eprintln!(
            "{} {} failed for good after {} attempts: {}",
            job.job_type,
            job.id,
            job.attempts,
            job.last_error.as_deref().unwrap_or("no error recorded")
        );
        Ok(())
    }
}

/// The worker's handlers, the state they share, its middleware, its
/// lifecycle handler and its schedule: `main` runs them, the tests drain
/// them.
fn registry(http: ureq::Agent) -> Registry {
    Registry::new()
        .state(http)
        .middleware(ReportFailures)
        .lifecycle(AlertOnDeadLetter)
        .register::<SendEmail>()
        .register::<DeliverWebhook>()
        .register::<BuildReport>()
        .register_async::<CheckUptime>()
        .periodic(nightly_report())
}

/// Each night at 03:00, Paris time: one report, once, whatever the runners.
fn nightly_report() -> Periodic {
    let report = BuildReport {
        month: "current".into(),
    };
    Periodic::new("nightly-report", "0 3 * * *", &report)
        .time_zone("Europe/Paris")
        .missed(Missed::Latest)
}

fn main() -> ExitCode {
    let http: ureq::Agent = ureq::Agent::config_builder()
        .timeout_global(Some(Duration::from_secs(20)))
        .build()
        .into();
    jobqueue::Cli::with_registry(registry(http)).main()
}

/// The worker's own tests, with the testing kit: each on a connection
/// inside a test transaction, so it sees its own jobs and leaves nothing
/// behind.
#[cfg(test)]
mod tests {
    use chrono::{TimeDelta, Utc};
    use jobqueue::testing::{
        Drain, Ended, Outcome, Stop, TestDatabase, enqueue_schedule, expect, perform,
        refute_enqueued,
    };

    use super::*;

    /// A database of the test's own (dropped with it), and a connection to
    /// it inside a test transaction: the test sees its own jobs and commits
    /// nothing.
    fn connect() -> (TestDatabase, PgConnection) {
        let db = TestDatabase::new().expect("a test database");
        let conn = jobqueue::testing::connect(db.url()).expect("a test connection");
        (db, conn)
    }

    #[test]
    fn signing_up_enqueues_one_welcome_email() {
        let (_db, mut conn) = connect();
        sign_up(&mut conn, "ada@example.com").expect("sign up");
        sign_up(&mut conn, "ada@example.com").expect("sign up again");
        let welcome = expect::<SendEmail>()
            .matching(|email| email.to == "ada@example.com")
            .queue("mail")
            .unique_key("welcome:ada@example.com")
            .tag("signup")
            .assert_enqueued_once(&mut conn);
        assert_eq!(welcome.job.subject, "Welcome");
        refute_enqueued::<SendEmail>(&mut conn, |email| email.to != "ada@example.com");
    }

    #[test]
    fn a_webhook_retries_on_503_and_fails_for_good_on_410() {
        let subscriber = Subscriber::answering(vec![503, 503, 410]);
        let (_db, mut conn) = connect();
        let hook = DeliverWebhook {
            url: subscriber.url(),
            event: serde_json::json!({"type": "order.paid", "order": 7}),
        };
        hook.enqueue(&mut conn).expect("enqueue");
        let registry = registry(ureq::Agent::new_with_defaults());
        // A minute on: past the backoff of the first retries (1 s, 2 s).
        let drained = Drain::new(&registry)
            .queue("webhooks")
            .as_of(Utc::now() + TimeDelta::minutes(1))
            .recursive(10)
            .run(&mut conn)
            .expect("drain");
        let ended: Vec<&Ended> = drained.jobs.iter().map(|job| &job.ended).collect();
        let [
            Ended::Retried { error: first, .. },
            Ended::Retried { .. },
            Ended::Failed { error: last },
        ] = ended[..]
        else {
            panic!("two retries, then the dead letter:\n{drained}");
        };
        assert!(first.contains("503"), "{first}");
        assert!(last.contains("is gone (410)"), "{last}");
        assert_eq!(drained.stop, Stop::Empty, "{drained}");
    }

    #[test]
    fn an_uptime_check_passes_on_a_listening_host_and_retries_on_a_closed_one() {
        let listening = std::net::TcpListener::bind("127.0.0.1:0").expect("a port");
        let up = listening.local_addr().expect("its address").to_string();
        let closed = {
            let gone = std::net::TcpListener::bind("127.0.0.1:0").expect("a port");
            gone.local_addr().expect("its address").to_string()
        };
        let registry = registry(ureq::Agent::new_with_defaults());
        // The kit drives the async handler on the test's own thread.
        let checked = perform(&registry, &CheckUptime { addr: up }).run();
        assert_eq!(checked.expect("performed").outcome, Outcome::Completed);
        let checked = perform(
            &registry,
            &CheckUptime {
                addr: closed.clone(),
            },
        )
        .run();
        match checked.expect("performed").outcome {
            Outcome::Retried { error, .. } => {
                assert!(error.starts_with(&format!("{closed} is down")), "{error}")
            }
            other => panic!("a closed port is retried: {other:?}"),
        }
    }

    #[test]
    fn the_nightly_schedule_enqueues_the_current_report() {
        let (_db, mut conn) = connect();
        enqueue_schedule(&mut conn, &nightly_report()).expect("fire the schedule");
        expect::<BuildReport>()
            .matching(|report| report.month == "current")
            .queue("reports")
            .assert_enqueued_once(&mut conn);
    }

    #[test]
    fn an_address_without_an_at_sign_fails_for_good_without_a_database() {
        let registry = registry(ureq::Agent::new_with_defaults());
        let email = SendEmail {
            to: "nobody".into(),
            subject: "Hi".into(),
        };
        let sent = perform(&registry, &email).run().expect("performed");
        let error = "`nobody` is not an email address".to_owned();
        assert_eq!(sent.outcome, Outcome::Failed { error });
    }

    #[test]
    fn a_report_stops_on_a_cancel_request_before_its_first_stage() {
        let registry = registry(ureq::Agent::new_with_defaults());
        let report = BuildReport {
            month: "2025-05".into(),
        };
        let built = perform(&registry, &report)
            .cancel_requested()
            .run()
            .expect("performed");
        assert_eq!(built.outcome, Outcome::Cancelled);
        assert!(built.reports.is_empty(), "{:?}", built.reports);
    }

    /// A webhook subscriber on a port of its own: answers each request with
    /// the next of its statuses (then 500), until dropped.
    struct Subscriber {
        server: std::sync::Arc<tiny_http::Server>,
        thread: Option<std::thread::JoinHandle<()>>,
    }

    impl Subscriber {
        fn answering(statuses: Vec<u16>) -> Self {
            let server =
                std::sync::Arc::new(tiny_http::Server::http("127.0.0.1:0").expect("bind a port"));
            let serving = std::sync::Arc::clone(&server);
            let thread = std::thread::spawn(move || {
                let mut statuses = statuses.into_iter();
                for request in serving.incoming_requests() {
                    let status = statuses.next().unwrap_or(500);
                    let _ = request.respond(tiny_http::Response::empty(status));
                }
            });
            Subscriber {
                server,
                thread: Some(thread),
            }
        }

        fn url(&self) -> String {
            let addr = self.server.server_addr().to_ip().expect("an IP address");
            format!("http://{addr}/hooks")
        }
    }

    impl Drop for Subscriber {
        fn drop(&mut self) {
            self.server.unblock();
            if let Some(thread) = self.thread.take() {
                let _ = thread.join();
            }
        }
    }
}
