//! The `jobqueue` command: the operational commands of `jobqueue-cli`, a
//! worker with the demo's and the bench's handlers, and `demo` and `bench`.
//! Applications build their own worker binary with
//! `jobqueue_cli::Cli::new().register::<TheirJob>().main()`, which has the
//! operational commands only.

use std::process::ExitCode;

use jobqueue_tools::ToolCommand;

fn main() -> ExitCode {
    jobqueue_cli::Cli::with_registry(jobqueue_tools::registry())
        .main_with::<ToolCommand, _, _>(std::env::args_os())
}
