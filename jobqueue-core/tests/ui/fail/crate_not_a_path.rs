use jobqueue_core::Job;
use serde::{Deserialize, Serialize};

#[derive(Serialize, Deserialize, Job)]
#[job(type = "email.send", crate = "my app")]
struct SendEmail {
    to: String,
}

fn main() {}
