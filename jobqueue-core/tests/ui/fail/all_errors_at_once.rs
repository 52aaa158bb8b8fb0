use jobqueue_core::Job;
use serde::{Deserialize, Serialize};

// Every mistake is reported in one compile, each at its own token.
#[derive(Serialize, Deserialize, Job)]
#[job(type = "email send", priority = 5000, queue = "", retries = 3)]
#[job(max_attempts = "5", priority = 1)]
struct SendEmail {
    to: String,
}

fn main() {}
