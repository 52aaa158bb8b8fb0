//! Whether the database answers, shared by a runner's threads so that an
//! outage is logged once.

use std::sync::Mutex;
use std::time::Instant;

use crate::shared::lock;

/// `error` on one line (libpq's messages span several).
pub(crate) fn one_line(error: &dyn std::fmt::Display) -> String {
    error
        .to_string()
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
}

/// Whether the database answers, shared so an outage is logged once, not
/// once per thread and attempt.
#[derive(Debug, Default)]
pub(crate) struct Health {
    down_since: Mutex<Option<Instant>>,
}

impl Health {
    pub(crate) fn report_down(&self, who: &str, error: &dyn std::fmt::Display) {
        let mut down = lock(&self.down_since);
        if down.is_none() {
            *down = Some(Instant::now());
            log::error!(
                "database unavailable ({who}: {}); retrying with backoff",
                one_line(error)
            );
        }
    }

    pub(crate) fn report_up(&self) {
        let mut down = lock(&self.down_since);
        if let Some(since) = down.take() {
            log::warn!(
                "database reachable again after {:.1} s",
                since.elapsed().as_secs_f64()
            );
        }
    }
}
