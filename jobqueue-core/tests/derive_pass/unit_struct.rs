use jobqueue_core::Job;
use serde::{Deserialize, Serialize};

#[derive(Serialize, Deserialize, Job)]
#[job(type = "cache.flush", priority = 0, max_attempts = 1)]
struct FlushCache;

#[test]
fn derives() {
    assert_eq!(<FlushCache as Job>::JOB_TYPE, "cache.flush");
    assert_eq!(<FlushCache as Job>::PRIORITY, 0);
    assert_eq!(<FlushCache as Job>::MAX_ATTEMPTS, 1);
    assert_eq!(<FlushCache as Job>::QUEUE, "default");
}
