//! `#[derive(Job)]` for jobqueue payload types.
//!
//! The derive itself arrives with its own milestone; until then, implement
//! `jobqueue_core::Job` by hand (three associated constants and nothing else).
