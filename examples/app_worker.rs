//! An application's own worker binary: its job types, derived, with their
//! handlers; the state they share (one HTTP client with its connection
//! pool, made once); and the `jobqueue` command line of `jobqueue-cli`
//! (migrate, work and the admin commands) in a few lines of `main`.
//!
//! ```sh
//! cargo run --example app_worker -- migrate
//! cargo run --example app_worker -- enqueue email.send '{"to": "a@example.com", "subject": "Hi"}'
//! cargo run --example app_worker -- enqueue webhook.deliver --payload-file event.json
//! cargo run --example app_worker -- work --concurrency 4      # Ctrl-C to stop
//! cargo run --example app_worker -- stats
//! cargo run --example app_worker -- cron list
//! ```

use std::process::ExitCode;
use std::time::Duration;

use jobqueue_core::{Job, Missed, Periodic};
use jobqueue_runner::{JobContext, JobError, Perform};
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
            return Err(JobError::permanent(format!(
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
        // A refused connection or a 5xx: `?` retries with the type's backoff.
        http.post(&self.url)
            .header("content-type", "application/json")
            .send(self.event.to_string())?;
        Ok(())
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

fn main() -> ExitCode {
    let http: ureq::Agent = ureq::Agent::config_builder()
        .timeout_global(Some(Duration::from_secs(20)))
        .build()
        .into();
    // Each night at 03:00, Paris time: one report, once, whatever the runners.
    let nightly = Periodic::new(
        "nightly-report",
        "0 3 * * *",
        &BuildReport {
            month: "current".into(),
        },
    )
    .time_zone("Europe/Paris")
    .missed(Missed::Latest);
    jobqueue_cli::Cli::new()
        .state(http)
        .register::<SendEmail>()
        .register::<DeliverWebhook>()
        .register::<BuildReport>()
        .periodic(nightly)
        .main()
}
