//! An application's worker binary, as the guide shows it: the operational
//! commands of `jobqueue-cli` with the test job types registered, one type
//! that declares its queue, priority and attempts (as an application's
//! would), for `enqueue`'s use of them, and the periodic jobs the tests ask
//! for in `JOBQUEUE_TEST_SCHEDULES`: `name|cron|missed|n[|time zone]`
//! entries separated by `;`, each slot enqueuing `test.noop` with payload
//! `n` (`missed`: `latest`, or `catch_up:N`). It also works the stateful
//! checker's job (`bench.chaos`, see `tests/chaos.rs`).

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
    let registry = jobqueue_tests::jobs::registry()
        .register::<SendEmail>()
        .register::<jobqueue_tools::bench::chaos::ChaosJob>();
    let mut cli = jobqueue_cli::Cli::with_registry(registry);
    for schedule in schedules() {
        cli = cli.periodic(schedule);
    }
    cli.main()
}
