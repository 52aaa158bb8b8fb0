//! An application's worker binary, as the README shows it: the operational
//! commands of `jobqueue-cli` with the test job types registered.

use std::process::ExitCode;

fn main() -> ExitCode {
    jobqueue_cli::Cli::with_registry(jobqueue_tests::jobs::registry()).main()
}
