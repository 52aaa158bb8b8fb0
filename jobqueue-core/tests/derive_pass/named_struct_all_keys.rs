use jobqueue_core::Job;
use serde::{Deserialize, Serialize};

#[derive(Serialize, Deserialize, Job)]
#[job(
    type = "email.send",
    priority = 150,
    queue = "mail",
    max_attempts = 5,
    max_payload_bytes = 65536,
    backoff_base_ms = 500,
    backoff_max_secs = 60
)]
struct SendEmail {
    to: String,
    subject: String,
}

#[test]
fn derives() {
    assert_eq!(<SendEmail as Job>::JOB_TYPE, "email.send");
    assert_eq!(<SendEmail as Job>::PRIORITY, 150);
    assert_eq!(<SendEmail as Job>::QUEUE, "mail");
    assert_eq!(<SendEmail as Job>::MAX_ATTEMPTS, 5);
    assert_eq!(<SendEmail as Job>::MAX_PAYLOAD_BYTES, 65536);
    let policy = <SendEmail as Job>::RETRY_POLICY.expect("a policy");
    assert_eq!(policy.base, std::time::Duration::from_millis(500));
    assert_eq!(policy.max, std::time::Duration::from_secs(60));
    assert_eq!(policy.jitter, jobqueue_core::RetryPolicy::DEFAULT.jitter);

    // One backoff key keeps the other's default; none keeps the runner's.
    let policy = <OnlyTheLongest as Job>::RETRY_POLICY.expect("a policy");
    assert_eq!(policy.base, jobqueue_core::RetryPolicy::DEFAULT.base);
    assert_eq!(policy.max, std::time::Duration::from_secs(7200));
    assert!(<NoBackoff as Job>::RETRY_POLICY.is_none());
}

#[derive(Serialize, Deserialize, Job)]
#[job(type = "report.build", backoff_max_secs = 7200)]
struct OnlyTheLongest;

#[derive(Serialize, Deserialize, Job)]
#[job(type = "report.send")]
struct NoBackoff;
