//! The tools around jobqueue that applications do not link: the demo, the
//! bench, finding or starting a PostgreSQL server (a private cluster for the
//! demo, the bench and the tests), what a failover scenario measures (for
//! the bench and the fault tests), and the `jobqueue` binary, which is
//! [`jobqueue_cli::Cli`] with the demo's and the bench's handlers and the
//! `demo` and `bench` commands.

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
/// the bench's (the bench's footprint measurement runs the binary's `work`).
pub fn registry() -> jobqueue_runner::Registry {
    demo::registry().register::<bench::BenchNoop>()
}

/// Locks a mutex whose data stays consistent even if a holder panicked
/// (plain map and vector updates).
pub(crate) fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}
