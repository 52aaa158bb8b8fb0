use jobqueue_core::Job;
use serde::{Deserialize, Serialize};

#[derive(Serialize, Deserialize, Job)]
#[job(type = "email send")]
struct SendEmail {
    to: String,
}

fn main() {}
