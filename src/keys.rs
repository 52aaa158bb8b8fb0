//! Keyed jobs for the concurrency-key tests: batches of them and a queue's
//! key limit.

use diesel::PgConnection;
use jobqueue_core::{Job, JobOptions, KeyLimit, NewJob, set_queue_key_limit};

use crate::jobs::Noop;

/// `n` jobs of `job` in `queue`, the i-th keyed by `key(i)`.
pub fn keyed<J: Job>(
    n: usize,
    queue: &str,
    job: impl Fn(usize) -> J,
    key: impl Fn(usize) -> String,
) -> Vec<NewJob> {
    (0..n)
        .map(|i| NewJob::from_job(&job(i), JobOptions::new().queue(queue).key(key(i))))
        .collect::<Result<_, _>>()
        .expect("build")
}

/// Makes `queue` known (an unkeyed `Noop` job names it) and sets its key
/// limit.
pub fn limit_queue(conn: &mut PgConnection, queue: &str, limit: KeyLimit) {
    Noop { n: 0 }
        .options()
        .queue(queue)
        .enqueue(conn)
        .expect("enqueue");
    set_queue_key_limit(conn, queue, Some(limit)).expect("set the key limit");
}
