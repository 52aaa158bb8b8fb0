//! The `jobqueue` binary of `jobqueue-tools` (the operational commands plus
//! `demo` and `bench`), with the test job types and the bench's registered.

use std::process::ExitCode;

use jobqueue_tools::ToolCommand;

fn main() -> ExitCode {
    let registry = jobqueue_tests::jobs::registry().register::<jobqueue_tools::bench::BenchNoop>();
    jobqueue_cli::Cli::with_registry(registry).main_with::<ToolCommand, _, _>(std::env::args_os())
}
