//! An application's worker binary, as the guide shows it: the operational
//! commands of `jobqueue-cli` with the test job types registered, one type
//! that declares its queue, priority and attempts (as an application's
//! would), for `enqueue`'s use of them, and the periodic jobs the tests ask
//! for in `JOBQUEUE_TEST_SCHEDULES`: `name|cron|missed|n[|time zone]`
//! entries separated by `;`, each slot enqueuing `test.noop` with payload
//! `n` (`missed`: `latest`, or `catch_up:N`). It also works the stateful
//! checker's job (`bench.chaos`, see `tests/chaos.rs`).
//!
//! Its application state is built as an application's pool would be
//! (`Cli::state_with`): when `JOBQUEUE_TEST_STATE_LOG` names a file, each
//! build appends the URL it was given there; `JOBQUEUE_TEST_STATE_FAIL`
//! makes the build fail with that message. `JOBQUEUE_TEST_ORDERED` names
//! queues it declares ordered per key (`QueueConfig`), `,`-separated.
//! With `JOBQUEUE_TEST_DEAD_LETTERS` set, each job that fails for good is
//! recorded as a `dead` effect by a lifecycle handler (`DeadLetters`).
//! With `JOBQUEUE_TEST_HOOKS` set, its enqueues run the `HookedStamp`
//! enqueue hook.

use std::process::ExitCode;

use jobqueue_core::{Missed, Periodic};
use jobqueue_tests::jobs::{Noop, SendEmail};

/// The schedules of `JOBQUEUE_TEST_SCHEDULES`.
fn schedules() -> Vec<Periodic> {
    let spec = std::env::var("JOBQUEUE_TEST_SCHEDULES").unwrap_or_default();
    spec.split(';')
        .filter(|entry| !entry.trim().is_empty())
        .map(|entry| {
            let fields: Vec<&str> = entry.split('|').collect();
            let (name, cron, missed, n, zone) = match fields[..] {
                [name, cron, missed, n] => (name, cron, missed, n, None),
                [name, cron, missed, n, zone] => (name, cron, missed, n, Some(zone)),
                _ => {
                    panic!("JOBQUEUE_TEST_SCHEDULES entry `{entry}`: want name|cron|missed|n[|tz]")
                }
            };
            let missed = match missed.strip_prefix("catch_up:") {
                Some(most) => Missed::CatchUp(most.parse().expect("catch_up:N")),
                None => Missed::Latest,
            };
            let n = n.parse().expect("a number");
            let periodic = Periodic::new(name, cron, &Noop { n }).missed(missed);
            match zone {
                Some(zone) => periodic.time_zone(zone),
                None => periodic,
            }
        })
        .collect()
}

fn main() -> ExitCode {
    let mut registry = jobqueue_tests::jobs::registry()
        .register::<SendEmail>()
        .register::<jobqueue_tools::bench::chaos::ChaosJob>();
    if std::env::var_os("JOBQUEUE_TEST_HOOKS").is_some() {
        jobqueue_tests::jobs::install_hooked_stamp();
    }
    if std::env::var_os("JOBQUEUE_TEST_DEAD_LETTERS").is_some() {
        registry = registry.lifecycle(jobqueue_tests::jobs::DeadLetters);
    }
    let mut cli = jobqueue_cli::Cli::with_registry(registry).state_with(build_state);
    for queue in std::env::var("JOBQUEUE_TEST_ORDERED")
        .unwrap_or_default()
        .split(',')
    {
        if !queue.is_empty() {
            cli = cli.queue(
                jobqueue_core::QueueConfig::new(queue).keys(jobqueue_core::KeyLimit::ordered()),
            );
        }
    }
    for schedule in schedules() {
        cli = cli.periodic(schedule);
    }
    cli.main()
}

/// The state `work`'s handlers get, built from the URL the CLI resolved.
struct AppState {
    /// The URL it was built for.
    _url: String,
}

fn build_state(url: &str) -> Result<AppState, String> {
    if let Some(log) = std::env::var_os("JOBQUEUE_TEST_STATE_LOG") {
        use std::io::Write;
        let mut file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(log)
            .map_err(|e| e.to_string())?;
        writeln!(file, "{url}").map_err(|e| e.to_string())?;
    }
    match std::env::var("JOBQUEUE_TEST_STATE_FAIL") {
        Ok(message) => Err(message),
        Err(_) => Ok(AppState {
            _url: url.to_owned(),
        }),
    }
}
