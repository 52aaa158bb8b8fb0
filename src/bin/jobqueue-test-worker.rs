//! The `jobqueue` CLI with the test job types registered: what an
//! application's own worker binary looks like.

use std::process::ExitCode;

use jobqueue_tests::jobs::{
    Blob, Cancellable, Chaos, ClockProbe, Effect, Hang, HangTimeout, Noop, Panic, Sleep, Stale,
};

fn main() -> ExitCode {
    jobqueue_runner::cli::Cli::new()
        .register::<Noop>()
        .register::<Sleep>()
        .register::<Panic>()
        .register::<Effect>()
        .register::<Cancellable>()
        .register::<Chaos>()
        .register::<Hang>()
        .register::<HangTimeout>()
        .register::<Stale>()
        .register::<ClockProbe>()
        .register::<Blob>()
        .main()
}
