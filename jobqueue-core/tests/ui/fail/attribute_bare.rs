use jobqueue_core::Job;
use serde::{Deserialize, Serialize};

#[derive(Serialize, Deserialize, Job)]
#[job]
struct SendEmail {
    to: String,
}

fn main() {}
