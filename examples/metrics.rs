//! Prometheus metrics from an embedded runner: kept in the process
//! (`MetricsMode::Keep`) and read with `RunnerHandle::metrics_text`, as an
//! application serving them from its own HTTP server would;
//! `MetricsMode::Serve(addr)` (`jobqueue work --metrics-addr`) serves them
//! at `GET /metrics` instead.
//!
//! ```sh
//! DATABASE_URL=postgres://localhost/app cargo run --example metrics
//! ```
//!
//! It applies the schema, enqueues 20 `mail` jobs and 3 `media` jobs that
//! fail, works them, and prints the metrics (histogram buckets left out).

use std::error::Error;
use std::time::{Duration, Instant};

use diesel::{Connection, PgConnection};
use jobqueue::runner::MetricsMode;
use jobqueue::{Job, JobContext, JobError, Perform, Registry, Runner, RunnerConfig};
use serde::{Deserialize, Serialize};

/// Succeeds.
#[derive(Serialize, Deserialize, Job)]
#[job(type = "example.mail", queue = "mail")]
struct Mail {
    n: u32,
}

impl Perform for Mail {
    fn perform(&self, _ctx: &mut JobContext<'_>) -> Result<(), JobError> {
        Ok(())
    }
}

/// Fails for good at once.
#[derive(Serialize, Deserialize, Job)]
#[job(type = "example.transcode", queue = "media")]
struct Transcode {
    n: u32,
}

impl Perform for Transcode {
    fn perform(&self, _ctx: &mut JobContext<'_>) -> Result<(), JobError> {
        Err(JobError::fail(format!("no codec for file {}", self.n)))
    }
}

fn main() -> Result<(), Box<dyn Error>> {
    let url = std::env::var("DATABASE_URL")
        .map_err(|_| "set DATABASE_URL to the application's database")?;
    let mut conn = PgConnection::establish(&url)?;
    jobqueue::run_migrations(&mut conn)?;

    let mut config = RunnerConfig::new(&url).concurrency(4);
    config.metrics = MetricsMode::Keep;
    config.metrics_refresh = Duration::from_millis(200);
    let registry = Registry::new().register::<Mail>().register::<Transcode>();
    let runner = Runner::new(config, registry).start()?;

    let mail: Vec<Mail> = (0..20).map(|n| Mail { n }).collect();
    let media: Vec<Transcode> = (0..3).map(|n| Transcode { n }).collect();
    Mail::enqueue_many(&mut conn, &mail)?;
    Transcode::enqueue_many(&mut conn, &media)?;
    let deadline = Instant::now() + Duration::from_secs(30);
    while runner.stats().completed + runner.stats().failed < 23 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    // One refresh of the table-wide queue gauges.
    std::thread::sleep(Duration::from_millis(500));

    let text = runner.metrics_text().unwrap_or_default();
    for line in text.lines() {
        if !line.starts_with('#') && !line.contains("_bucket") {
            println!("{line}");
        }
    }
    runner.shutdown();
    Ok(())
}
