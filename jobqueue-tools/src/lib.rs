//! The tools around jobqueue that applications do not link: the demo, the
//! bench, finding or starting a PostgreSQL server (a private cluster for the
//! demo, the bench and the tests), what a failover scenario measures (for
//! the bench and the fault tests), and the `jobqueue` binary, which is
//! [`jobqueue_cli::Cli`] with the demo's and the bench's handlers and the
//! `demo` and `bench` commands.

/// Prints a line on standard output, as `println!` does, except that a
/// reader that went away (`jobqueue bench | head`) ends the output and not
/// the run: a bench still drops the database it made. Other write errors
/// are dropped the same way: the output is a report, not the work.
macro_rules! out {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stdout(), $($arg)*);
    }};
}
pub(crate) use out;

pub mod bench;
mod command;
pub mod demo;
mod error;
pub mod failover;
pub mod postgres;
mod tool_db;

use std::sync::{Mutex, MutexGuard, PoisonError};

pub use command::{BenchArgs, DemoArgs, ToolCommand};
pub use error::ToolError;

/// The handlers of the `jobqueue` binary's `work`: the demo's job types and
/// the bench's (the bench's footprint measurement and its stateful checker
/// run the binary's `work`).
pub fn registry() -> jobqueue_runner::Registry {
    demo::registry()
        .register::<bench::BenchNoop>()
        .register::<bench::chaos::ChaosJob>()
}

/// Locks a mutex whose data stays consistent even if a holder panicked
/// (plain map and vector updates).
pub(crate) fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}
