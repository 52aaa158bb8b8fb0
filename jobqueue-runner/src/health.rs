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

/// One thread's connection attempts that failed in a row. The database
/// counts as down from the second: a single failure is also what a new
/// session the server ended as it started (a terminated backend) looks like.
#[derive(Debug, Default)]
pub(crate) struct ConnectFailures(u32);

impl ConnectFailures {
    /// A connection attempt of `who` failed with `error`.
    pub(crate) fn failed(&mut self, health: &Health, who: &str, error: &dyn std::fmt::Display) {
        self.0 += 1;
        if self.0 >= 2 {
            health.report_down(who, error);
        } else {
            log::info!("{who}: cannot connect ({}); trying again", one_line(error));
        }
    }

    /// A connection attempt succeeded: the database answers.
    pub(crate) fn connected(&mut self, health: &Health) {
        self.0 = 0;
        health.report_up();
    }
}
