use jobqueue_core::Job;
use serde::{Deserialize, Serialize};

#[derive(Serialize, Deserialize, Job)]
#[job(type = "invoice.send", concurrency_key = "customer")]
struct SendInvoice {
    customer_id: u64,
    amount: u64,
}

#[derive(Serialize, Deserialize, Job)]
#[job(type = "invoice.empty", concurrency_key = "customer")]
struct NoFields {}

fn main() {}
