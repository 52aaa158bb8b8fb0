use jobqueue_core::Job;
use serde::{Deserialize, Serialize};

#[derive(Serialize, Deserialize, Job)]
#[serde(tag = "kind")]
#[job(type = "report.build", priority = 1000, max_attempts = 1000)]
enum Report {
    Daily,
    Monthly { month: u32 },
    Custom(String),
}

#[test]
fn derives() {
    assert_eq!(<Report as Job>::JOB_TYPE, "report.build");
    assert_eq!(<Report as Job>::PRIORITY, 1000);
    assert_eq!(<Report as Job>::MAX_ATTEMPTS, 1000);
}
