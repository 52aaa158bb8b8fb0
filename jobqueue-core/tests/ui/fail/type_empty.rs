use jobqueue_core::Job;
use serde::{Deserialize, Serialize};

#[derive(Serialize, Deserialize, Job)]
#[job(type = "")]
struct SendEmail {
    to: String,
}

fn main() {}
