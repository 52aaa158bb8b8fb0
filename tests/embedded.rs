//! A runner embedded in an application, as the guide's runner chapter
//! (docs/src/runner.md, "Embedding a runner") shows it: started by the
//! application, stopped on the application's own SIGTERM handling, logging
//! through the application's logger. One test per process: it sends SIGTERM to itself.

use std::time::Duration;

use jobqueue_tests::{TestDb, count_where, wait_for};

use jobqueue::{Job, JobContext, JobError, Perform};
use serde::{Deserialize, Serialize};

#[derive(Serialize, Deserialize, Job)]
#[job(
    type = "thumbnail.make",
    queue = "media",
    backoff_base_ms = 500,
    backoff_max_secs = 60
)]
struct MakeThumbnail {
    image: String,
}

impl Perform for MakeThumbnail {
    fn perform(&self, _ctx: &mut JobContext<'_>) -> Result<(), JobError> {
        if self.image.is_empty() {
            return Err(JobError::fail("no image"));
        }
        Ok(())
    }
}

// ---- the guide: "The runner", "Embedding a runner" ----

use jobqueue::runner::RunSummary;
use jobqueue::{Registry, Runner, RunnerConfig};
use signal_hook::consts::{SIGINT, SIGTERM};

fn run_worker(database_url: &str) -> Result<RunSummary, Box<dyn std::error::Error>> {
    // The runner logs through `log`: without a logger it says nothing.
    env_logger::Builder::from_env(env_logger::Env::default().default_filter_or("info")).init();

    let config = RunnerConfig::new(database_url)
        .concurrency(8)
        .queues(["media"]);
    let registry = Registry::new().register::<MakeThumbnail>();
    let runner = Runner::new(config, registry).start()?;

    // The application decides when to stop; here, on SIGINT or SIGTERM.
    let trigger = runner.trigger();
    let mut signals = signal_hook::iterator::Signals::new([SIGINT, SIGTERM])?;
    std::thread::spawn(move || {
        if signals.forever().next().is_some() {
            trigger.request_shutdown(); // returns at once; running jobs get the grace period
        }
    });

    // ... the application's own work (an HTTP server, say) goes on here ...

    let summary = runner.wait(); // returns once the runner has stopped
    log::info!("worker stopped: {:?}", summary.stats);
    Ok(summary)
}

// ---- the test ----

#[test]
fn an_embedded_runner_works_and_stops_on_the_applications_signal() {
    let (db, mut conn) = TestDb::connected();
    for n in 0..20 {
        MakeThumbnail {
            image: format!("{n}.png"),
        }
        .enqueue(&mut conn)
        .expect("enqueue");
    }
    let url = db.url.clone();
    let worker = std::thread::spawn(move || run_worker(&url).map_err(|e| e.to_string()));
    // Completed jobs' rows are deleted as they complete (the default
    // retention).
    wait_for("every thumbnail made", Duration::from_secs(30), || {
        count_where(&mut conn, "true") == 0
    });
    let kill = std::process::Command::new("kill")
        .args(["-TERM", &std::process::id().to_string()])
        .status()
        .expect("run kill");
    assert!(kill.success());
    let summary = worker
        .join()
        .expect("the worker thread")
        .expect("the worker ran");
    assert_eq!(summary.stats.completed, 20);
    assert_eq!(summary.abandoned, 0);
}
