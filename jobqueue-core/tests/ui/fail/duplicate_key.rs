use jobqueue_core::Job;
use serde::{Deserialize, Serialize};

#[derive(Serialize, Deserialize, Job)]
#[job(type = "email.send", priority = 5, priority = 10)]
struct SendEmail {
    to: String,
}

fn main() {}
