use jobqueue_core::Job;
use serde::{Deserialize, Serialize};

#[derive(Serialize, Deserialize, Job)]
#[job(type = "report.build", concurrency_key = "month")]
enum Report {
    Daily,
    Monthly { month: u32 },
}

#[derive(Serialize, Deserialize, Job)]
#[job(type = "image.resize", concurrency_key = "0")]
struct Resize(String, u32);

#[derive(Serialize, Deserialize, Job)]
#[job(type = "cache.flush", concurrency_key = "cache")]
struct FlushCache;

fn main() {}
