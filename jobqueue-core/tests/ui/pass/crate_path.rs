// An application that re-exports the core crate under its own path.
mod app {
    pub mod jobs {
        pub use jobqueue_core::*;
    }
}

use app::jobs::Job;
use serde::{Deserialize, Serialize};

#[derive(Serialize, Deserialize, Job)]
#[job(type = "app.sync", crate = "crate::app::jobs", queue = "sync")]
struct Sync {
    account: u64,
}

fn main() {
    assert_eq!(<Sync as app::jobs::Job>::JOB_TYPE, "app.sync");
    assert_eq!(<Sync as Job>::QUEUE, "sync");
}
