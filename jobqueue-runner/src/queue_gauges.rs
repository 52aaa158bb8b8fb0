//! The table-wide queue gauges (depth by state, oldest due age, paused) of
//! every known queue, computed by one runner at a time.
//!
//! Every runner serving metrics tries, on a connection of its own, to take
//! a session-level advisory lock (`jobqueue_core::engine::try_lead_queue_gauges`).
//! The one that holds it computes the gauges every refresh interval with
//! `jobqueue_core::list_queues` (partial indexes only: cheap at any history
//! size) and exports them; the others export none, so summing or graphing
//! them across runners counts each queue once. The lock is the session's:
//! a leader that dies, or loses its connection, hands the role to the next
//! runner whose turn comes, within one interval.
//!
//! A queue this runner reported once, or claimed jobs from, and that no
//! longer shows in the table (emptied, its failed jobs pruned) reads 0,
//! never its last value.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Instant;

use crossbeam_channel::Receiver;
use diesel::PgConnection;

use crate::backoff::stopped_within;
use crate::health::ConnectFailures;
use crate::metrics::{Metrics, QueueGaugeFamilies, QueueLabels, QueueStateLabels};
use crate::shared::Shared;

/// The job states of `jobqueue_queue_jobs`.
const STATES: [&str; 5] = ["due", "scheduled", "unhandled", "held", "failed"];

pub(crate) fn run(shared: Arc<Shared>, stop: Receiver<()>) {
    let Some(metrics) = shared.metrics.as_ref() else {
        return;
    };
    let gauges = &metrics.queues;
    let mut conn = None;
    let mut failures = ConnectFailures::default();
    let mut leading = false;
    let mut known = BTreeSet::new();
    loop {
        if conn.is_none() {
            match shared.connector.service_connection("queue gauges") {
                Ok(c) => {
                    failures.connected(&shared.health);
                    conn = Some(c);
                }
                Err(e) => failures.failed(&shared.health, "queue gauges", &e),
            }
        }
        if let Some(c) = conn.as_mut()
            && let Err(e) = refresh(c, &mut leading, metrics, &mut known)
        {
            log::debug!("queue gauges: {}", crate::health::one_line(&e));
            // The lock may have gone with the connection: start over.
            conn = None;
            leading = false;
        }
        if !leading {
            clear(gauges);
        }
        gauges.leader.set(i64::from(leading));
        if stopped_within(&stop, shared.config.metrics_refresh) {
            break;
        }
    }
    log::debug!("queue gauges stopped");
}

/// Takes the lead if free; if leading, sets every known queue's gauges.
fn refresh(
    conn: &mut PgConnection,
    leading: &mut bool,
    metrics: &Metrics,
    known: &mut BTreeSet<String>,
) -> jobqueue_core::Result<()> {
    let gauges = &metrics.queues;
    if !*leading {
        *leading = jobqueue_core::engine::try_lead_queue_gauges(conn)?;
        if !*leading {
            return Ok(());
        }
        log::info!("this runner now computes the table-wide queue gauges");
    }
    let started = Instant::now();
    let queues = jobqueue_core::list_queues(conn)?;
    let mut seen = BTreeSet::new();
    for q in &queues {
        let counts = [q.due, q.scheduled, q.unhandled, q.held, q.failed];
        set(
            gauges,
            &q.queue,
            counts,
            q.oldest_due_age().map_or(0.0, |a| a.as_secs_f64()),
            q.paused,
        );
        seen.insert(q.queue.clone());
    }
    // Queues this runner claimed from are known too, even if they emptied
    // before any refresh saw them.
    known.extend(metrics.queues_claimed());
    for gone in known.difference(&seen) {
        set(gauges, gone, [0; 5], 0.0, false);
    }
    known.extend(seen);
    gauges.refresh.set(started.elapsed().as_secs_f64());
    Ok(())
}

fn set(gauges: &QueueGaugeFamilies, queue: &str, counts: [i64; 5], oldest_due: f64, paused: bool) {
    for (state, n) in STATES.into_iter().zip(counts) {
        gauges
            .jobs
            .get_or_create(&QueueStateLabels {
                queue: queue.to_owned(),
                state,
            })
            .set(n);
    }
    let labels = QueueLabels {
        queue: queue.to_owned(),
    };
    gauges.oldest_due.get_or_create(&labels).set(oldest_due);
    gauges.paused.get_or_create(&labels).set(i64::from(paused));
}

fn clear(gauges: &QueueGaugeFamilies) {
    gauges.jobs.clear();
    gauges.oldest_due.clear();
    gauges.paused.clear();
}
