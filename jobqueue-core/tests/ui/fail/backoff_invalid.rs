use jobqueue_core::Job;
use serde::{Deserialize, Serialize};

#[derive(Serialize, Deserialize, Job)]
#[job(type = "a.b", backoff_base_ms = 90000, backoff_max_secs = 60)]
struct FirstDelayLongerThanLongest;

#[derive(Serialize, Deserialize, Job)]
#[job(type = "a.c", backoff_base_ms = 7200000)]
struct LongerThanTheDefaultLongest;

#[derive(Serialize, Deserialize, Job)]
#[job(type = "a.d", backoff_base_ms = -5, backoff_max_secs = 0)]
struct OutOfRange;

fn main() {}
