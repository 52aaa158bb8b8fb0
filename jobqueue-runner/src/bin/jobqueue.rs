//! The `jobqueue` command: the admin CLI and a worker with the built-in demo
//! handlers. Applications build their own with
//! `jobqueue_runner::cli::Cli::new().register::<TheirJob>().main()`.

use std::process::ExitCode;

fn main() -> ExitCode {
    jobqueue_runner::cli::Cli::with_registry(jobqueue_runner::demo::registry()).main()
}
