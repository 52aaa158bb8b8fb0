use jobqueue_core::Job;
use serde::{Deserialize, Serialize};

#[derive(Serialize, Deserialize, Job)]
#[job(type = "email.send", prio = 5)]
struct SendEmail {
    to: String,
}

fn main() {}
