//! The `jobqueue` CLI with the test job types registered: what an
//! application's own worker binary looks like.

use std::process::ExitCode;

use jobqueue_tests::jobs::{Cancellable, Effect, Noop, Panic, Sleep};

fn main() -> ExitCode {
    jobqueue_runner::cli::Cli::new()
        .register::<Noop>()
        .register::<Sleep>()
        .register::<Panic>()
        .register::<Effect>()
        .register::<Cancellable>()
        .main()
}
