//! Claimed jobs on their way to the workers, taken from the runner's queues
//! in turn: a job of a quiet queue starts at the next free worker, never
//! behind another queue's prefetched backlog.
//!
//! The jobs wait in one FIFO per queue; a bounded crossbeam channel carries
//! one token per waiting job. A worker takes a token, then the next job of
//! the next queue in the rotation. The channel keeps what the runner's
//! shutdown relies on: receivers block until a job comes or every sender
//! is gone, and its bound holds the runner's backpressure.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};

use crossbeam_channel::{Receiver, Sender, TrySendError, bounded};

use crate::messages::Claimed;
use crate::sync::lock;

/// The waiting jobs, by queue, and the order in which queues take turns.
#[derive(Default)]
struct Waiting {
    by_queue: HashMap<String, VecDeque<Claimed>>,
    /// Queues with waiting jobs, the next to serve first.
    turns: VecDeque<String>,
}

impl Waiting {
    fn push(&mut self, claimed: Claimed) {
        let queue = &claimed.row.queue;
        match self.by_queue.get_mut(queue) {
            Some(jobs) => jobs.push_back(claimed),
            None => {
                self.turns.push_back(queue.clone());
                self.by_queue
                    .insert(queue.clone(), VecDeque::from([claimed]));
            }
        }
    }

    /// The oldest job of the queue whose turn it is; that queue goes to the
    /// back of the rotation.
    fn pop(&mut self) -> Option<Claimed> {
        let queue = self.turns.pop_front()?;
        let jobs = self.by_queue.get_mut(&queue)?;
        let claimed = jobs.pop_front();
        if jobs.is_empty() {
            self.by_queue.remove(&queue);
        } else {
            self.turns.push_back(queue);
        }
        claimed
    }
}

/// Creates the way from the fetcher to the workers, holding at most `bound`
/// jobs.
pub(crate) fn dispatch(bound: usize) -> (JobSender, JobReceiver) {
    let waiting = Arc::new(Mutex::new(Waiting::default()));
    let (tokens_tx, tokens_rx) = bounded(bound);
    (
        JobSender {
            waiting: Arc::clone(&waiting),
            tokens: tokens_tx,
        },
        JobReceiver {
            waiting,
            tokens: tokens_rx,
        },
    )
}

/// The fetcher's end (and the early claims').
#[derive(Clone)]
pub(crate) struct JobSender {
    waiting: Arc<Mutex<Waiting>>,
    tokens: Sender<()>,
}

/// Every worker has stopped: the job was not queued.
#[derive(Debug)]
pub(crate) struct Disconnected;

impl JobSender {
    /// Queues a job for the workers; waits while `bound` jobs wait.
    pub(crate) fn send(&self, claimed: Claimed) -> Result<(), Disconnected> {
        lock(&self.waiting).push(claimed);
        match self.tokens.try_send(()) {
            Ok(()) => Ok(()),
            Err(TrySendError::Full(())) => self.tokens.send(()).map_err(|_| Disconnected),
            Err(TrySendError::Disconnected(())) => Err(Disconnected),
        }
    }

    /// Jobs waiting for a worker.
    pub(crate) fn len(&self) -> usize {
        self.tokens.len()
    }

    /// The queues with jobs waiting for a worker.
    pub(crate) fn waiting_queues(&self) -> Vec<String> {
        lock(&self.waiting).turns.iter().cloned().collect()
    }
}

/// A worker's end (and the runner's, to take back what no worker started).
#[derive(Clone)]
pub(crate) struct JobReceiver {
    waiting: Arc<Mutex<Waiting>>,
    tokens: Receiver<()>,
}

impl JobReceiver {
    /// The next job, waiting for one; `None` once the fetcher is gone and
    /// nothing waits.
    pub(crate) fn recv(&self) -> Option<Claimed> {
        self.tokens.recv().ok()?;
        lock(&self.waiting).pop()
    }

    /// The next job if one waits.
    pub(crate) fn try_recv(&self) -> Option<Claimed> {
        self.tokens.try_recv().ok()?;
        lock(&self.waiting).pop()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn job(queue: &str, n: i32) -> Claimed {
        let now = chrono::Utc::now();
        // `JobRow` is built only by its crate (`#[non_exhaustive]`): here
        // as a query builds it, from its columns in table order.
        let none = None::<String>;
        let never = None::<chrono::DateTime<chrono::Utc>>;
        let row = <jobqueue_core::JobRow as diesel::Queryable<
            jobqueue_core::schema::jobqueue_jobs::SqlType,
            diesel::pg::Pg,
        >>::build((
            jobqueue_core::JobId::new(),
            "t".to_owned(),
            queue.to_owned(),
            100, // priority
            jobqueue_core::JobStatus::Claimed,
            serde_json::Value::Null,      // payload
            now,                          // run_at
            n,                            // attempts
            3,                            // max_attempts
            none.clone(),                 // last_error
            serde_json::Value::Null,      // errors
            none.clone(),                 // unique_key
            none.clone(),                 // worker_id
            1,                            // claim_count
            never,                        // claimed_at
            never,                        // heartbeat_at
            never,                        // lease_expires_at
            false,                        // cancel_requested
            0i16,                         // progress
            none.clone(),                 // current_stage
            0,                            // events_count
            now,                          // created_at
            never,                        // started_at
            never,                        // finished_at
            0,                            // snoozes
            none.clone(),                 // traceparent
            none,                         // concurrency_key
            None::<jobqueue_core::JobId>, // workflow_id
            None::<Vec<String>>,          // tags
            None::<serde_json::Value>,    // metadata
            None::<serde_json::Value>,    // step_outputs
            None::<serde_json::Value>,    // step_cursor
        ))
        .expect("a row");
        let state = Arc::new(crate::job_state::JobState::new(
            row.lease(),
            "t".into(),
            None,
            false,
            0,
        ));
        Claimed { row, state }
    }

    #[test]
    fn queues_take_turns_and_each_keeps_its_order() {
        let (tx, rx) = dispatch(100);
        for n in 0..5 {
            tx.send(job("busy", n)).expect("send");
        }
        tx.send(job("quiet", 0)).expect("send");
        tx.send(job("other", 0)).expect("send");
        let order: Vec<(String, i32)> = std::iter::from_fn(|| rx.try_recv())
            .map(|c| (c.row.queue.clone(), c.row.attempts))
            .collect();
        let expected = [
            ("busy", 0),
            ("quiet", 0),
            ("other", 0),
            ("busy", 1),
            ("busy", 2),
            ("busy", 3),
            ("busy", 4),
        ];
        assert_eq!(
            order,
            expected.map(|(q, n)| (q.to_owned(), n)).to_vec(),
            "the quiet queue's job starts second, not sixth"
        );
        assert_eq!(tx.len(), 0);
    }

    #[test]
    fn receivers_end_when_the_sender_is_gone() {
        let (tx, rx) = dispatch(4);
        tx.send(job("q", 0)).expect("send");
        drop(tx);
        assert!(rx.recv().is_some());
        assert!(rx.recv().is_none());
    }
}
