//! The database URL as libpq reads it, in either form (a
//! `postgres://` URL or `key=value` pairs): its options split off and put
//! back, and the options the runner adds for those the URL does not set,
//! so that a dead or frozen server is noticed in bounded time.
//!
//! The defaults, for a `RunnerConfig::db_timeout` of T seconds:
//!
//! - `connect_timeout` T (2 to 10 s): per host, so a multi-host URL moves
//!   on from a host that accepts the TCP connection and never answers;
//! - `keepalives_idle=10`, `keepalives_interval=5`, `keepalives_count=3`:
//!   an idle connection to a host that vanished ends in about 25 s;
//! - `tcp_user_timeout` T: a connection whose sent data goes unacknowledged
//!   (a host gone behind a network that drops packets) ends after T.
//!
//! None of these ends a connection to a frozen server process whose host
//! still acknowledges packets: that is `hang_guard`'s work.

use std::time::Duration;

use crate::RunnerError;

/// `url` with the runner's connection defaults for the options it does not
/// set (see the module documentation).
pub(crate) fn with_defaults(url: &str, db_timeout: Duration) -> Result<String, RunnerError> {
    let secs = db_timeout.as_secs_f64();
    let defaults = [
        ("connect_timeout", connect_timeout(db_timeout).to_string()),
        ("keepalives", "1".to_owned()),
        ("keepalives_idle", "10".to_owned()),
        ("keepalives_interval", "5".to_owned()),
        ("keepalives_count", "3".to_owned()),
        (
            "tcp_user_timeout",
            format!("{}", (secs * 1000.0).round() as u64),
        ),
    ];
    Ok(jobqueue_core::engine::with_default_options(url, &defaults)?)
}

/// Whole seconds for libpq's `connect_timeout` (which takes at least 2).
fn connect_timeout(db_timeout: Duration) -> u64 {
    db_timeout.as_secs_f64().ceil().clamp(2.0, 10.0) as u64
}
