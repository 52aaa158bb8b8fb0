use jobqueue_core::Job;
use serde::{Deserialize, Serialize};

#[derive(Serialize, Deserialize, Job)]
#[job(type = "email.send", max_attempts = 0)]
struct SendEmail {
    to: String,
}

fn main() {}
