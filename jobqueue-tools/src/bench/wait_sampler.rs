//! What the server's processes wait on, sampled every 100 ms during the
//! soak, so a window whose pickups slowed can be lined up with its cause:
//! sessions of the bench's database waiting on a lock (behind a vacuum's
//! truncation, say) or on the WAL's flush, a vacuum cutting the table's
//! file, the checkpointer writing out or syncing data files.
//!
//! The checkpointer's wait shows only to a role that may read all
//! statistics (`pg_read_all_stats`, or a superuser such as the bench's
//! usual `postgres`); otherwise that count stays 0.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use diesel::{Connection, PgConnection, RunQueryDsl};

use super::db;
use crate::{ToolError, lock};

/// How often `pg_stat_activity` is read.
const EVERY: Duration = Duration::from_millis(100);

/// One read of `pg_stat_activity`.
const WAITS: &str = "
    SELECT count(*) FILTER (WHERE datname = current_database()
                              AND wait_event_type = 'Lock') AS lock,
           count(*) FILTER (WHERE wait_event = 'DataFileTruncate') AS truncate,
           count(*) FILTER (WHERE datname = current_database()
                              AND wait_event IN ('WALSync', 'WALWrite')) AS wal,
           count(*) FILTER (WHERE backend_type = 'checkpointer'
                              AND wait_event IN ('DataFileSync', 'DataFileFlush',
                                                 'DataFileWrite')) AS checkpoint_io
    FROM pg_stat_activity";

/// Processes found waiting, summed over the samples of a window (a session
/// that waited through 3 samples counts 3).
#[derive(Debug, Default, Clone, Copy, diesel::QueryableByName)]
pub(crate) struct Waits {
    /// Sessions of the database waiting on a heavyweight lock.
    #[diesel(sql_type = diesel::sql_types::BigInt)]
    lock: i64,
    /// Processes cutting a data file (a vacuum giving a table's end back).
    #[diesel(sql_type = diesel::sql_types::BigInt)]
    truncate: i64,
    /// Sessions of the database waiting on the WAL's write or flush.
    #[diesel(sql_type = diesel::sql_types::BigInt)]
    wal: i64,
    /// The checkpointer writing, flushing or syncing data files.
    #[diesel(sql_type = diesel::sql_types::BigInt)]
    checkpoint_io: i64,
}

impl Waits {
    fn add(&mut self, other: &Waits) {
        self.lock += other.lock;
        self.truncate += other.truncate;
        self.wal += other.wal;
        self.checkpoint_io += other.checkpoint_io;
    }
}

impl std::fmt::Display for Waits {
    /// The non-zero counts, as a soak line shows them.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let parts: Vec<String> = [
            (self.lock, "lock"),
            (self.truncate, "truncate"),
            (self.wal, "WAL"),
            (self.checkpoint_io, "checkpoint I/O"),
        ]
        .iter()
        .filter(|(n, _)| *n > 0)
        .map(|(n, what)| format!("{what} {n}"))
        .collect();
        f.write_str(&parts.join(" "))
    }
}

/// A thread sampling the waits until dropped.
pub(crate) struct WaitSampler {
    stop: Arc<AtomicBool>,
    since: Arc<Mutex<Waits>>,
    thread: Option<JoinHandle<()>>,
}

impl WaitSampler {
    /// Starts sampling on a connection of its own to `url`.
    pub(crate) fn start(url: &str) -> Result<Self, ToolError> {
        let mut conn = PgConnection::establish(url).map_err(db)?;
        // The first read fails here, not silently in the thread.
        diesel::sql_query(WAITS)
            .get_result::<Waits>(&mut conn)
            .map_err(db)?;
        let stop = Arc::new(AtomicBool::new(false));
        let since = Arc::new(Mutex::new(Waits::default()));
        let thread = {
            let (stop, since) = (Arc::clone(&stop), Arc::clone(&since));
            std::thread::spawn(move || {
                let mut next = Instant::now();
                while !stop.load(Ordering::Relaxed) {
                    // A failed read leaves a gap in the counts, nothing more.
                    if let Ok(now) = diesel::sql_query(WAITS).get_result::<Waits>(&mut conn) {
                        lock(&since).add(&now);
                    }
                    next += EVERY;
                    std::thread::sleep(next.saturating_duration_since(Instant::now()));
                }
            })
        };
        Ok(WaitSampler {
            stop,
            since,
            thread: Some(thread),
        })
    }

    /// The waits counted since the last call.
    pub(crate) fn take(&self) -> Waits {
        std::mem::take(&mut *lock(&self.since))
    }
}

impl Drop for WaitSampler {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}
