use jobqueue_core::Job;
use serde::{Deserialize, Serialize};

// The longest names allowed and keys spread over several attributes.
#[derive(Serialize, Deserialize, Job)]
#[job(
    type = "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
)]
#[job(queue = "qqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqq")]
struct Longest;

// Every allowed character, a raw string, typed literals.
#[derive(Serialize, Deserialize, Job)]
#[job(
    type = r"Az09_.:-",
    priority = 7i32,
    max_attempts = 2i32,
    max_payload_bytes = 1usize
)]
struct Edges;

// `-0` is 0: in range.
#[derive(Serialize, Deserialize, Job)]
#[job(type = "zero", priority = -0)]
struct Zero;

#[test]
fn derives() {
    assert_eq!(<Longest as Job>::JOB_TYPE.len(), 128);
    assert_eq!(<Longest as Job>::QUEUE.len(), 64);
    assert_eq!(<Edges as Job>::JOB_TYPE, "Az09_.:-");
    assert_eq!(<Edges as Job>::PRIORITY, 7);
    assert_eq!(<Edges as Job>::MAX_ATTEMPTS, 2);
    assert_eq!(<Edges as Job>::MAX_PAYLOAD_BYTES, 1);
    assert_eq!(<Zero as Job>::PRIORITY, 0);
}
