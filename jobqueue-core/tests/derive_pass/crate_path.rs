// An application that re-exports the core crate under its own path
// (`crate::app::jobs`, in main.rs).
use crate::app::jobs::{self, Job};
use serde::{Deserialize, Serialize};

#[derive(Serialize, Deserialize, Job)]
#[job(type = "app.sync", crate = "crate::app::jobs", queue = "sync")]
struct Sync {
    account: u64,
}

#[test]
fn derives() {
    assert_eq!(<Sync as jobs::Job>::JOB_TYPE, "app.sync");
    assert_eq!(<Sync as Job>::QUEUE, "sync");
}
