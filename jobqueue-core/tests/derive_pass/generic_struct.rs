use std::fmt::Debug;

use jobqueue_core::Job;
use serde::{Deserialize, Serialize};

#[derive(Serialize, Deserialize, Job)]
#[job(type = "wrap", queue = "generic")]
struct Wrap<T: Clone>
where
    T: Debug,
{
    inner: T,
}

#[derive(Serialize, Deserialize, Job)]
#[job(type = "pair")]
struct Pair<A, B>(A, B);

fn assert_job<J: Job>() {}

#[test]
fn derives() {
    assert_job::<Wrap<u32>>();
    assert_job::<Wrap<String>>();
    assert_job::<Pair<u8, Vec<String>>>();
    assert_eq!(<Wrap<u32> as Job>::JOB_TYPE, "wrap");
    assert_eq!(<Wrap<String> as Job>::QUEUE, "generic");
    assert_eq!(<Pair<u8, bool> as Job>::JOB_TYPE, "pair");
}
