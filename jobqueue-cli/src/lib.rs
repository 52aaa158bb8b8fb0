//! The `jobqueue` command line for an application's own worker binary:
//! `migrate`, `work`, `enqueue`, `list`, `show`, `stats`, `retry`, `cancel`,
//! `prune`, `queue` (pause, resume, limit, list), `doctor`, `dashboard`, with the
//! application's handlers for `work`; `--json` on the read commands; and
//! `completions` and `man`, the shell completion scripts and man pages of
//! the binary, made from the same command definitions.
//!
//! ```no_run
//! use jobqueue_core::Job;
//! use jobqueue_runner::{JobContext, JobError, Perform};
//! use serde::{Deserialize, Serialize};
//!
//! #[derive(Serialize, Deserialize)]
//! struct SendEmail { to: String }
//! impl Job for SendEmail { const JOB_TYPE: &'static str = "email.send"; }
//! impl Perform for SendEmail {
//!     fn perform(&self, ctx: &mut JobContext<'_>) -> Result<(), JobError> {
//!         ctx.progress(100, "sent")
//!     }
//! }
//!
//! fn main() -> std::process::ExitCode {
//!     jobqueue_cli::Cli::new().register::<SendEmail>().main()
//! }
//! ```
//!
//! Every command works on the database named by `DATABASE_URL` or
//! `--database-url` and stops with an error when neither is given. A binary
//! may add commands of its own with [`Cli::main_with`] (the `jobqueue`
//! binary of `jobqueue-tools` adds `demo` and `bench` so).

mod args;
mod commands;
mod connect;
mod dashboard;
mod doctor;
mod error;
mod generate;
mod json;
mod keys;
mod output;
mod rate;
mod terminal;
mod workflow;

use std::ffi::OsString;
use std::process::ExitCode;

use clap::{ArgMatches, CommandFactory, FromArgMatches, Subcommand};
use jobqueue_runner::{Perform, Registry};

pub use error::{CliError, EXIT_BAD_INPUT, EXIT_FAILED, EXIT_SUCCESS, EXIT_UNREACHABLE};

/// This crate's version, which `--version` prints (the workspace versions
/// its crates together: see `jobqueue_core::VERSION`).
pub const VERSION: &str = env!("CARGO_PKG_VERSION");

use args::Args;

/// The `jobqueue` command line, with the handlers `work` runs.
#[derive(Default)]
pub struct Cli {
    registry: Registry,
    /// State built for `work` only, from the URL it resolved.
    deferred: Vec<Deferred>,
    /// The name messages go under; the binary's file name if `None`.
    name: Option<String>,
}

/// A state to give `work`'s handlers, built from the database URL.
type Deferred = Box<dyn FnOnce(&str, Registry) -> Result<Registry, CliError>>;

impl std::fmt::Debug for Cli {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Cli")
            .field("registry", &self.registry)
            .field("deferred_states", &self.deferred.len())
            .field("name", &self.name)
            .finish()
    }
}

/// Commands a binary adds to the operational ones: a [`clap::Subcommand`]
/// enum whose subcommands [`Cli::main_with`] parses beside them, with the
/// global `--database-url` and `--verbose`.
pub trait Extra: Subcommand {
    /// Runs the command; `database_url` is `--database-url` or
    /// `DATABASE_URL`, if given.
    fn run(self, database_url: Option<String>) -> Result<(), CliError>;
}

/// No extra commands.
enum NoExtra {}

impl FromArgMatches for NoExtra {
    fn from_arg_matches(_: &ArgMatches) -> Result<Self, clap::Error> {
        Err(clap::Error::new(clap::error::ErrorKind::InvalidSubcommand))
    }

    fn update_from_arg_matches(&mut self, _: &ArgMatches) -> Result<(), clap::Error> {
        match *self {}
    }
}

impl Subcommand for NoExtra {
    fn augment_subcommands(command: clap::Command) -> clap::Command {
        command
    }

    fn augment_subcommands_for_update(command: clap::Command) -> clap::Command {
        command
    }

    fn has_subcommand(_: &str) -> bool {
        false
    }
}

impl Extra for NoExtra {
    fn run(self, _: Option<String>) -> Result<(), CliError> {
        match self {}
    }
}

impl Cli {
    /// A CLI with no handlers (`work` then refuses to start).
    pub fn new() -> Self {
        Self::default()
    }

    /// A CLI whose `work` runs the handlers of `registry`.
    pub fn with_registry(registry: Registry) -> Self {
        Cli {
            registry,
            ..Self::default()
        }
    }

    /// The name the binary's messages go under (`NAME: error: …`); by
    /// default, the binary's file name, as it was started.
    pub fn name(mut self, name: impl Into<String>) -> Self {
        self.name = Some(name.into());
        self
    }

    /// Declares a periodic job for `work`, as [`Registry::periodic`] does.
    pub fn periodic(mut self, schedule: jobqueue_core::Periodic) -> Self {
        self.registry = self.registry.periodic(schedule);
        self
    }

    /// Declares a queue's settings for `work`, as [`Registry::queue`] does.
    pub fn queue(mut self, config: jobqueue_core::QueueConfig) -> Self {
        self.registry = self.registry.queue(config);
        self
    }

    /// Gives `work`'s handlers `value`, as [`Registry::state`] does. A
    /// value that costs something to build (a pool, a client that
    /// connects) is better given by [`Cli::state_with`].
    pub fn state<S: Send + Sync + 'static>(mut self, value: S) -> Self {
        self.registry = self.registry.state(value);
        self
    }

    /// Gives `work`'s handlers the value `build` makes from the database
    /// URL the command line resolved (`--database-url`, else
    /// `DATABASE_URL`), as [`Registry::state`] does. `build` runs only
    /// when `work` starts, after its flags were checked: `--help`,
    /// `migrate`, the admin commands and a refused flag never build the
    /// application's pools. Its error stops `work` before any job is
    /// claimed (exit code 1), with the error's message.
    ///
    /// ```no_run
    /// # struct Pool;
    /// # impl Pool { fn connect(_: &str) -> Result<Pool, std::io::Error> { Ok(Pool) } }
    /// jobqueue_cli::Cli::new()
    ///     .state_with(|url| Pool::connect(url))
    ///     .main();
    /// ```
    pub fn state_with<S, E, F>(mut self, build: F) -> Self
    where
        S: Send + Sync + 'static,
        E: Into<Box<dyn std::error::Error + Send + Sync>>,
        F: FnOnce(&str) -> Result<S, E> + 'static,
    {
        self.deferred.push(Box::new(move |url, registry: Registry| {
            let value = build(url).map_err(|e| CliError::State(e.into()))?;
            Ok(registry.state(value))
        }));
        self
    }

    /// Adds `T`'s handler for `work`, and makes `enqueue` apply what `T`
    /// declares (queue, priority, attempts) and check payloads against it.
    pub fn register<T: Perform>(mut self) -> Self {
        self.registry = self.registry.register::<T>();
        self
    }

    /// Parses the process's arguments, runs the command, and returns the
    /// exit code: 0 on success (and when the output's reader went away
    /// early, as `| head` does), 2 when the command line is wrong, 3 when
    /// the database cannot be reached, 1 on any other error (a failed
    /// `doctor` check among them); each error is one line on stderr saying
    /// what and how to fix it. See [`CliError::exit_code`].
    pub fn main(self) -> ExitCode {
        self.main_with::<NoExtra, _, _>(std::env::args_os())
    }

    /// Like [`Cli::main`], with the arguments given.
    pub fn main_from<I, T>(self, args: I) -> ExitCode
    where
        I: IntoIterator<Item = T>,
        T: Into<OsString> + Clone,
    {
        self.main_with::<NoExtra, _, _>(args)
    }

    /// Like [`Cli::main_from`], with the commands of `E` beside the
    /// operational ones.
    pub fn main_with<E, I, T>(self, args: I) -> ExitCode
    where
        E: Extra,
        I: IntoIterator<Item = T>,
        T: Into<OsString> + Clone,
    {
        let args: Vec<OsString> = args.into_iter().map(Into::into).collect();
        let parsed = E::augment_subcommands(Args::command())
            .try_get_matches_from(&args)
            .and_then(|matches| parse::<E>(&matches));
        let (global, command) = match parsed {
            Ok(parsed) => parsed,
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
        init_logging(global.verbose);
        let name = self
            .name
            .clone()
            .unwrap_or_else(|| generate::bin_name(args.first()));
        let app = commands::App {
            name: &name,
            registry: self.registry,
            deferred: self.deferred,
        };
        let result = match command {
            Parsed::Extra(extra) => extra.run(global.database_url),
            Parsed::Ops(command) => match (*command, global.database_url) {
                // Made from the command definitions: no database needed.
                (args::Command::Completions { shell }, _) => generate::completions(
                    E::augment_subcommands(Args::command()),
                    &generate::bin_name(args.first()),
                    shell,
                ),
                (args::Command::Man { dir }, _) => generate::man(
                    E::augment_subcommands(Args::command()),
                    &generate::bin_name(args.first()),
                    dir.as_deref(),
                ),
                (command, Some(url)) => commands::run(&url, command, app),
                // A worker missing its configuration must not look healthy
                // while working some other database.
                (_, None) => Err(CliError::Usage(
                    "no database given: set DATABASE_URL or pass --database-url".into(),
                )),
            },
        };
        match result {
            Ok(()) => ExitCode::SUCCESS,
            // The reader took what it wanted (`| head`): nothing to say.
            Err(e) if e.is_closed_pipe() => ExitCode::from(e.exit_code()),
            Err(e) => {
                eprintln!("{name}: error: {e}");
                ExitCode::from(e.exit_code())
            }
        }
    }
}

/// The global options.
struct Global {
    database_url: Option<String>,
    verbose: bool,
}

enum Parsed<E> {
    // Boxed: `work`'s arguments make it far larger than most commands.
    Ops(Box<args::Command>),
    Extra(E),
}

fn parse<E: Extra>(matches: &ArgMatches) -> Result<(Global, Parsed<E>), clap::Error> {
    let global = Global {
        database_url: matches.get_one::<String>("database_url").cloned(),
        verbose: matches.get_flag("verbose"),
    };
    let command = match matches.subcommand_name() {
        Some(name) if E::has_subcommand(name) => Parsed::Extra(E::from_arg_matches(matches)?),
        _ => Parsed::Ops(Box::new(Args::from_arg_matches(matches)?.command)),
    };
    Ok((global, command))
}

fn init_logging(verbose: bool) {
    let default = if verbose { "info" } else { "warn" };
    let _ = env_logger::Builder::from_env(env_logger::Env::default().default_filter_or(default))
        .format_target(false)
        .try_init();
}
