use jobqueue_core::Job;
use serde::{Deserialize, Serialize};

#[derive(Serialize, Deserialize, Job)]
#[job(type = "a.b", key = customer)]
struct NotALiteral {
    customer: u64,
}

#[derive(Serialize, Deserialize, Job)]
#[job(type = "a.c", key = 42)]
struct NotAString {
    customer: u64,
}

#[derive(Serialize, Deserialize, Job)]
#[job(type = "a.d", concurrency_key = "customer", concurrency_key = "region")]
struct GivenTwice {
    customer: u64,
    region: String,
}

fn main() {}
