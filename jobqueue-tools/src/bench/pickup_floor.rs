//! The pickup floor: the least a pickup can take on the machine as loaded
//! at that moment. Beside a runner, a thread woken by the enqueue's
//! notification issues the runner's own claim statement for a queue no
//! runner works, at once, with nothing around it (no fetcher, no worker
//! pool, no dispatch): its latency from enqueue commit to the claim's
//! return, measured under the same load as the runner's pickups, tells
//! what the runner adds from what the machine costs.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, RecvTimeoutError, Sender};
use jobqueue_core::engine::{Claim, Lease, QueueSession};
use tokio_postgres::{AsyncMessage, NoTls};

use super::queues::trickle;
use crate::ToolError;

/// How often the floor's threads look up to check whether to stop.
const STOP_CHECK: Duration = Duration::from_millis(50);

/// Instants by the jobs' `seq`.
pub(crate) type Instants = HashMap<u64, Instant>;

/// A running floor measurement: a trickle into its queue, a listener and
/// a claimer.
/// Dropped without [`PickupFloor::finish`] (the bench failed meanwhile),
/// it tells its threads to stop.
pub(crate) struct PickupFloor {
    /// Told to each thread in turn: the producer, the claimer (once the
    /// producer's last job committed), the listener.
    stop: [Arc<AtomicBool>; 3],
    threads: Option<Threads>,
}

/// The floor's threads.
struct Threads {
    producer: JoinHandle<Result<Instants, ToolError>>,
    listener: JoinHandle<Result<(), ToolError>>,
    claimer: JoinHandle<Result<Instants, ToolError>>,
}

impl Drop for PickupFloor {
    fn drop(&mut self) {
        for stop in &self.stop {
            stop.store(true, Ordering::Relaxed);
        }
    }
}

impl PickupFloor {
    /// Starts listening, then the trickle of one job every `every` into
    /// `queue` (which no runner may work).
    pub(crate) fn start(
        url: &str,
        queue: &'static str,
        every: Duration,
    ) -> Result<Self, ToolError> {
        let stop: [Arc<AtomicBool>; 3] = Default::default();
        let (wake, woken) = crossbeam_channel::unbounded();
        let (ready_tx, ready) = crossbeam_channel::bounded(1);
        let listener = {
            let (url, stop) = (url.to_owned(), Arc::clone(&stop[2]));
            std::thread::spawn(move || listen(&url, queue, &stop, &wake, &ready_tx))
        };
        // Jobs enqueued before the LISTEN took effect would wait for none.
        match ready.recv_timeout(Duration::from_secs(10)) {
            Ok(()) => {}
            Err(_) => {
                stop[2].store(true, Ordering::Relaxed);
                return Err(match listener.join() {
                    Ok(Err(e)) => e,
                    _ => ToolError::Usage("pickup floor: the listener did not start".into()),
                });
            }
        }
        let claimer = {
            let (url, stop) = (url.to_owned(), Arc::clone(&stop[1]));
            std::thread::spawn(move || claim_when_woken(&url, queue, &stop, &woken))
        };
        let producer = {
            let (url, stop) = (url.to_owned(), Arc::clone(&stop[0]));
            let sent = AtomicU64::new(0);
            std::thread::spawn(move || trickle(&url, queue, every, &stop, &sent))
        };
        Ok(PickupFloor {
            stop,
            threads: Some(Threads {
                producer,
                listener,
                claimer,
            }),
        })
    }

    /// Stops the trickle, lets the last jobs be claimed, and returns each
    /// job's enqueue commit and claim return.
    pub(crate) fn finish(mut self) -> Result<(Instants, Instants), ToolError> {
        let joined = |what: &str| ToolError::Usage(format!("pickup floor: the {what} panicked"));
        let threads = self
            .threads
            .take()
            .ok_or_else(|| ToolError::Usage("pickup floor: finished twice".into()))?;
        let [producer, claimer, listener] = &self.stop;
        producer.store(true, Ordering::Relaxed);
        let commits = threads.producer.join().map_err(|_| joined("producer"));
        claimer.store(true, Ordering::Relaxed);
        let claims = threads.claimer.join().map_err(|_| joined("claimer"));
        listener.store(true, Ordering::Relaxed);
        threads.listener.join().map_err(|_| joined("listener"))??;
        Ok((commits??, claims??))
    }
}

/// `LISTEN`s on the jobs' channel and passes each notification for
/// `queue` on to `wake` until `stop`; `ready` once listening.
fn listen(
    url: &str,
    queue: &str,
    stop: &AtomicBool,
    wake: &Sender<()>,
    ready: &Sender<()>,
) -> Result<(), ToolError> {
    let failed = |e: &dyn std::fmt::Display| ToolError::Usage(format!("pickup floor: {e}"));
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| failed(&e))?;
    runtime.block_on(async {
        let (client, mut connection) = tokio_postgres::connect(url, NoTls)
            .await
            .map_err(|e| failed(&e))?;
        let (queue, wake) = (queue.to_owned(), wake.clone());
        let driver = tokio::spawn(async move {
            while let Some(message) = std::future::poll_fn(|cx| connection.poll_message(cx)).await {
                if let Ok(AsyncMessage::Notification(n)) = message
                    && n.payload() == queue
                {
                    let _ = wake.send(());
                }
            }
        });
        let listen = format!("LISTEN {}", jobqueue_core::engine::NOTIFY_CHANNEL);
        client
            .batch_execute(&listen)
            .await
            .map_err(|e| failed(&e))?;
        let _ = ready.send(());
        while !stop.load(Ordering::Relaxed) {
            tokio::time::sleep(STOP_CHECK).await;
        }
        drop(client);
        let _ = driver.await;
        Ok(())
    })
}

/// Claims `queue`'s jobs each time it is woken and notes when each claim
/// returned; a thread of its own completes them (deleting them, as a
/// runner does by default), as a runner's completer does. After `stop`,
/// drains what is left.
fn claim_when_woken(
    url: &str,
    queue: &str,
    stop: &AtomicBool,
    woken: &Receiver<()>,
) -> Result<Instants, ToolError> {
    let mut session = QueueSession::establish(url)?;
    let mut completer = QueueSession::establish(url)?;
    let claim = Claim::new("pickup-floor").queues([queue]).limit(16);
    let (done, to_complete) = crossbeam_channel::unbounded::<Vec<Lease>>();
    std::thread::scope(|scope| {
        let completing = scope.spawn(move || -> Result<(), ToolError> {
            for leases in to_complete {
                completer.complete_and_delete_many(&leases)?;
            }
            Ok(())
        });
        let mut claimed = HashMap::new();
        let mut stopping = false;
        let claiming: Result<Instants, ToolError> = loop {
            match woken.recv_timeout(STOP_CHECK) {
                Ok(()) => {}
                Err(RecvTimeoutError::Timeout) => {
                    stopping = stopping || stop.load(Ordering::Relaxed);
                    if !stopping {
                        continue;
                    }
                }
                // No more wake-ups: claim what is left, then end.
                Err(RecvTimeoutError::Disconnected) => stopping = true,
            }
            let rows = match session.claim(&claim) {
                Ok(rows) => rows,
                Err(e) => break Err(e.into()),
            };
            let at = Instant::now();
            if rows.is_empty() && stopping {
                break Ok(claimed);
            }
            for row in &rows {
                if let Some(seq) = row.payload.get("seq").and_then(serde_json::Value::as_u64) {
                    claimed.insert(seq, at);
                }
            }
            // The completer ends only once this sender is dropped.
            let _ = done.send(rows.iter().map(|row| row.lease()).collect());
        };
        drop(done);
        let completed = completing
            .join()
            .map_err(|_| ToolError::Usage("pickup floor: the completer panicked".into()));
        let claimed = claiming?;
        completed??;
        Ok(claimed)
    })
}
