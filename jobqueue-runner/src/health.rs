//! Whether the database answers, shared by a runner's threads so that an
//! outage is logged once.

use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use crate::sync::lock;

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
    /// Connections of the runner's threads opened again after one was lost.
    reconnects: AtomicU64,
}

impl Health {
    /// Connections opened again after one was lost, by every thread.
    pub(crate) fn reconnects(&self) -> u64 {
        self.reconnects.load(Ordering::Relaxed)
    }

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
pub(crate) struct ConnectFailures {
    in_a_row: u32,
    /// The thread had a connection before.
    connected_before: bool,
}

impl ConnectFailures {
    /// A connection attempt of `who` failed with `error`.
    pub(crate) fn failed(&mut self, health: &Health, who: &str, error: &dyn std::fmt::Display) {
        self.in_a_row += 1;
        if self.in_a_row >= 2 {
            health.report_down(who, error);
        } else {
            log::info!("{who}: cannot connect ({}); trying again", one_line(error));
        }
    }

    /// A connection attempt succeeded: the database answers.
    pub(crate) fn connected(&mut self, health: &Health) {
        self.in_a_row = 0;
        if self.connected_before {
            health.reconnects.fetch_add(1, Ordering::Relaxed);
        }
        self.connected_before = true;
        health.report_up();
    }
}
