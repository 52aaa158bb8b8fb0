//! The listener: waits on `LISTEN jobqueue_jobs` and wakes the fetcher when a
//! job becomes available in one of this runner's queues.
//!
//! Diesel can only drain notifications that already arrived, so the listener
//! uses the `postgres` crate, which blocks on the socket: pickup latency is a
//! round trip, not a poll interval. After a reconnect it wakes the fetcher
//! once, for notifications missed while disconnected.

use std::sync::Arc;
use std::time::Duration;

use crossbeam_channel::Receiver;
use postgres::fallible_iterator::FallibleIterator;

use crate::backoff::{Backoff, is_stopped, stopped_within};
use crate::health::{ConnectFailures, one_line};
use crate::shared::Shared;

/// How often the listener looks up from its socket to check for shutdown.
const STOP_CHECK: Duration = Duration::from_millis(250);

/// Where and how the listener connects: see `listener_tls`.
pub(crate) struct ListenerConnection {
    pub(crate) config: postgres::Config,
    pub(crate) tls: postgres_openssl::MakeTlsConnector,
}

pub(crate) fn run(shared: Arc<Shared>, stop: Receiver<()>, connection: ListenerConnection) {
    let mut backoff = Backoff::new();
    let listen = format!("LISTEN \"{}\"", jobqueue_core::NOTIFY_CHANNEL);
    let mut failures = ConnectFailures::default();
    while !is_stopped(&stop) {
        let connected = connection
            .config
            .connect(connection.tls.clone())
            .and_then(|mut client| client.batch_execute(&listen).map(|()| client));
        let mut client = match connected {
            Ok(client) => client,
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
        shared.wake_fetcher();
        loop {
            if is_stopped(&stop) {
                return;
            }
            let mut notifications = client.notifications();
            match notifications.timeout_iter(STOP_CHECK).next() {
                Ok(Some(notification)) => {
                    let queue = notification.payload();
                    if shared.config.queues.is_empty()
                        || shared.config.queues.iter().any(|q| q == queue)
                    {
                        if let Some(metrics) = &shared.metrics {
                            metrics.wakeups.inc();
                        }
                        shared.announce();
                    }
                }
                Err(e) => {
                    // Reconnect at once; only a failed connect is an outage.
                    log::info!("listener: connection lost ({}); reconnecting", one_line(&e));
                    break;
                }
                Ok(None) => {}
            }
        }
    }
    log::debug!("listener stopped");
}
