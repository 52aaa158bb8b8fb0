//! The jobqueue worker runner.
//!
//! So far: [`postgres`], which finds a PostgreSQL server to use or starts a
//! private cluster from the machine's PostgreSQL binaries.

pub mod postgres;
