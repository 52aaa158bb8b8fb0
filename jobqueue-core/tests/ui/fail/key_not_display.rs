use jobqueue_core::Job;
use serde::{Deserialize, Serialize};

#[derive(Serialize, Deserialize)]
struct Customer {
    id: u64,
}

#[derive(Serialize, Deserialize, Job)]
#[job(type = "a.b", concurrency_key = "customer")]
struct KeyWithoutDisplay {
    customer: Customer,
}

#[derive(Serialize, Deserialize, Job)]
#[job(type = "a.c", concurrency_key = "customer")]
struct OptionalKeyWithoutDisplay {
    customer: Option<Customer>,
}

fn main() {}
