use jobqueue_core::Job;
use serde::{Deserialize, Serialize};

#[derive(Serialize, Deserialize, Job)]
#[job(type = "email.send")]
struct SendEmail {
    #[job(queue = "mail")]
    to: String,
}

fn main() {}
