use jobqueue_core::Job;
use serde::{Deserialize, Serialize};

#[derive(Serialize, Deserialize, Job)]
#[job(
    type = "email.send",
    priority = 150,
    queue = "mail",
    max_attempts = 5,
    max_payload_bytes = 65536
)]
struct SendEmail {
    to: String,
    subject: String,
}

fn main() {
    assert_eq!(<SendEmail as Job>::JOB_TYPE, "email.send");
    assert_eq!(<SendEmail as Job>::PRIORITY, 150);
    assert_eq!(<SendEmail as Job>::QUEUE, "mail");
    assert_eq!(<SendEmail as Job>::MAX_ATTEMPTS, 5);
    assert_eq!(<SendEmail as Job>::MAX_PAYLOAD_BYTES, 65536);
}
