use jobqueue_core::Job;
use serde::{Deserialize, Serialize};

#[derive(Serialize, Deserialize, Job)]
#[job(type = "image.resize", queue = "media")]
struct Resize(String, u32);

#[test]
fn derives() {
    assert_eq!(<Resize as Job>::JOB_TYPE, "image.resize");
    assert_eq!(<Resize as Job>::QUEUE, "media");
    // Keys left out keep the trait's defaults.
    assert_eq!(<Resize as Job>::PRIORITY, 100);
    assert_eq!(<Resize as Job>::MAX_ATTEMPTS, 3);
    assert_eq!(<Resize as Job>::MAX_PAYLOAD_BYTES, 1024 * 1024);
}
