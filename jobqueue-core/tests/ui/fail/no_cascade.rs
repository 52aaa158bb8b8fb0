use jobqueue_core::Job;
use serde::{Deserialize, Serialize};

// The attribute is wrong, but code using the type as a job reports nothing more.
#[derive(Serialize, Deserialize, Job)]
#[job(type = "email.send", priority = "high")]
struct SendEmail {
    to: String,
}

fn main() {
    let _ = <SendEmail as Job>::PRIORITY;
    let _ = |conn: &mut diesel::PgConnection| SendEmail { to: String::new() }.enqueue(conn);
}
