//! The `jobqueue` CLI with the test job types registered: what an
//! application's own worker binary looks like.

use std::process::ExitCode;

fn main() -> ExitCode {
    jobqueue_runner::cli::Cli::with_registry(jobqueue_tests::jobs::registry()).main()
}
