//! The listener: waits on `LISTEN jobqueue_jobs` and wakes the fetcher when a
//! job becomes available in one of this runner's queues.
//!
//! Diesel can only drain notifications that already arrived, so the listener
//! uses `tokio-postgres` on a single-threaded runtime of its own, which
//! waits on the socket: pickup latency is a round trip, not a poll interval.
//! After a reconnect it wakes the fetcher once, for notifications missed
//! while disconnected.
//!
//! Its connection is the connector's (`connector::listen`): the first of
//! the URL's hosts to answer within the connect timeout and take writes.
//!
//! The connection is checked every [`QUIET_CHECK`] without a notification,
//! and at once whenever another runner thread had to replace its own
//! connection (lost, or found read-only): the server must answer an empty
//! query within the runner's `db_timeout` and still take writes. A frozen
//! server, or a primary fenced off after a failover, would otherwise keep
//! the listener on a socket no notification comes through, and pickup
//! would fall back to the poll. A server in recovery refuses `LISTEN`, so
//! the listener never settles on a standby.

use std::sync::Arc;
use std::time::{Duration, Instant};

use crossbeam_channel::Receiver;
use tokio::runtime::Runtime;
use tokio::sync::mpsc;

use crate::backoff::{Backoff, is_stopped, stopped_within};
use crate::claimer::Claimer;
use crate::connector::{Listening, Message, still_primary};
use crate::health::ConnectFailures;
use crate::shared::Shared;

/// How often the listener looks up from its socket to check for shutdown.
const STOP_CHECK: Duration = Duration::from_millis(250);

/// How long a connection may stay quiet before the listener checks that
/// the server still answers.
const QUIET_CHECK: Duration = Duration::from_secs(5);

/// The start of a notification's payload that announces jobs waiting for
/// their concurrency key's room, rather than due jobs (see
/// `jobqueue_core`'s `KEY_ADMIT` and the inserts): no queue name has a space.
const WAITING_PREFIX: &str = "waiting ";

pub(crate) fn run(shared: Arc<Shared>, claimer: &Claimer, stop: Receiver<()>) {
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(e) => {
            log::error!("listener: cannot start its runtime ({e}); jobs are found by polling only");
            return;
        }
    };
    let mut backoff = Backoff::new();
    let mut failures = ConnectFailures::default();
    while !is_stopped(&stop) {
        let Listening {
            client,
            mut messages,
        } = match runtime.block_on(shared.connector.listen()) {
            Ok(connected) => connected,
            Err(e) => {
                failures.failed(&shared.health, "listener", &e);
                if stopped_within(&stop, backoff.next_delay()) {
                    break;
                }
                continue;
            }
        };
        backoff.reset();
        failures.connected(&shared.health);
        claimer.listener_connected(true);
        claimer.wake();
        let mut heard = Instant::now();
        let mut others_seen = others_replaced(&shared);
        loop {
            if is_stopped(&stop) {
                return;
            }
            // Another thread's connection was just ended or replaced (hung,
            // lost, or read-only): this one may be on the same server.
            let others = others_replaced(&shared);
            if heard.elapsed() >= QUIET_CHECK || others != others_seen {
                others_seen = others;
                let timeout = shared.config.db_timeout;
                if let Err(why) = runtime.block_on(still_primary(&client, timeout)) {
                    log::warn!("listener: {why}; reconnecting");
                    break;
                }
                heard = Instant::now();
            }
            match next_message(&runtime, &mut messages) {
                Some(Ok(payload)) => {
                    heard = Instant::now();
                    // `waiting <queue>`: keyed jobs wait for admission.
                    let (queue, waiting) = match payload.strip_prefix(WAITING_PREFIX) {
                        Some(queue) => (queue.to_owned(), true),
                        None => (payload, false),
                    };
                    if shared.config.queues.is_empty() || shared.config.queues.contains(&queue) {
                        if let Some(metrics) = &shared.metrics {
                            metrics.wakeups.inc();
                        }
                        if waiting {
                            claimer.announce_waiting();
                        } else {
                            claimer.announce(queue);
                        }
                    }
                }
                Some(Err(e)) => {
                    // Reconnect at once; only a failed connect is an outage.
                    log::info!("listener: connection lost ({e}); reconnecting");
                    break;
                }
                None => {}
            }
        }
        claimer.listener_connected(false);
    }
    log::debug!("listener stopped");
}

/// Connections of the runner's other threads ended (by the watchdog) or
/// replaced so far.
fn others_replaced(shared: &Shared) -> (u64, u64) {
    (shared.health.reconnects(), shared.watchdog.ended())
}

/// The next message within [`STOP_CHECK`], if any.
fn next_message(
    runtime: &Runtime,
    messages: &mut mpsc::UnboundedReceiver<Message>,
) -> Option<Message> {
    runtime.block_on(async {
        match tokio::time::timeout(STOP_CHECK, messages.recv()).await {
            Ok(Some(message)) => Some(message),
            Ok(None) => Some(Err("the connection ended".to_owned())),
            Err(_) => None,
        }
    })
}
