use jobqueue_core::Job;
use serde::{Deserialize, Serialize};

#[derive(Serialize, Deserialize, Job)]
#[job(queue = "mail", priority = 5)]
struct SendEmail {
    to: String,
}

fn main() {}
