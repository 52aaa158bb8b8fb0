//! An application's worker binary, as the README shows it: the operational
//! commands of `jobqueue-cli` with the test job types registered, and one
//! type that declares its queue, priority and attempts (as an application's
//! would), for `enqueue`'s use of them.

use std::process::ExitCode;

use jobqueue_core::Job;
use jobqueue_runner::{JobContext, JobError, Perform};
use serde::{Deserialize, Serialize};

/// A job type with declarations of its own.
#[derive(Serialize, Deserialize, Job)]
#[job(type = "email.send", priority = 150, queue = "mail", max_attempts = 5)]
struct SendEmail {
    to: String,
    subject: String,
}

impl Perform for SendEmail {
    fn perform(&self, _ctx: &mut JobContext<'_>) -> Result<(), JobError> {
        Ok(())
    }
}

fn main() -> ExitCode {
    jobqueue_cli::Cli::with_registry(jobqueue_tests::jobs::registry().register::<SendEmail>())
        .main()
}
