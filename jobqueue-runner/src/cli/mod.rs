//! The `jobqueue` command line: migrate, work, enqueue, list, show, stats,
//! retry, cancel, prune, demo.
//!
//! An application gets the same CLI with its own handlers:
//! `Cli::new().register::<SendEmail>().main()`.

mod args;
mod commands;

use std::process::ExitCode;

use clap::Parser;

use crate::{Perform, Registry};

pub use args::Args;

/// The `jobqueue` command line, with the handlers `work` runs.
#[derive(Debug, Default)]
pub struct Cli {
    registry: Registry,
}

impl Cli {
    /// A CLI with no handlers (`work` then refuses to start).
    pub fn new() -> Self {
        Self::default()
    }

    /// A CLI whose `work` runs the handlers of `registry`.
    pub fn with_registry(registry: Registry) -> Self {
        Cli { registry }
    }

    /// Adds `T`'s handler for `work`.
    pub fn register<T: Perform>(mut self) -> Self {
        self.registry = self.registry.register::<T>();
        self
    }

    /// Parses the process's arguments, runs the command, and returns the
    /// exit code: 0 on success, 1 on an error (one line on stderr), 2 on a
    /// usage error.
    pub fn main(self) -> ExitCode {
        self.main_from(std::env::args_os())
    }

    /// Like [`Cli::main`], with the arguments given.
    pub fn main_from<I, T>(self, args: I) -> ExitCode
    where
        I: IntoIterator<Item = T>,
        T: Into<std::ffi::OsString> + Clone,
    {
        let args = match Args::try_parse_from(args) {
            Ok(args) => args,
            Err(e) => {
                // --help and --version print and succeed; usage errors exit 2.
                let _ = e.print();
                return if e.use_stderr() {
                    ExitCode::from(2)
                } else {
                    ExitCode::SUCCESS
                };
            }
        };
        init_logging(&args);
        match commands::run(args, self.registry) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("jobqueue: error: {e}");
                ExitCode::FAILURE
            }
        }
    }
}

fn init_logging(args: &Args) {
    let default = if args.verbose { "info" } else { "warn" };
    let _ = env_logger::Builder::from_env(env_logger::Env::default().default_filter_or(default))
        .format_target(false)
        .try_init();
}
