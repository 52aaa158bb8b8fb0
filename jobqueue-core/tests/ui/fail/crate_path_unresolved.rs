use jobqueue_core::Job;
use serde::{Deserialize, Serialize};

mod app {}

#[derive(Serialize, Deserialize, Job)]
#[job(type = "email.send", crate = "crate::app::jobs")]
struct SendEmail {
    to: String,
}

fn main() {}
