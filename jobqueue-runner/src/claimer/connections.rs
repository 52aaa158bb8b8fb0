//! The claim connections: threads that run the claims the fetcher decides
//! on, each on a connection of its own, and hand back what they claimed.
//! They decide nothing: the fetcher sends a claim only to a connection it
//! knows is idle, and delivers what comes back itself, so the fetcher can
//! have a second claim under way (another backlog batch, or an early
//! claim) while one runs. The reads the fetcher's decisions need (limits,
//! types handled elsewhere, the heads of resuming queues, admissions of
//! announced waiting jobs) run on an idle connection too, from the
//! fetcher's thread ([`Line::with_idle`]), so the fetcher opens no
//! connection of its own.

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, Sender, unbounded};
use jobqueue_core::engine::{Claim, Claimed};

use crate::db::Db;
use crate::panics::panic_message;
use crate::shared::Shared;
use crate::sync::lock;
use crate::trace::ClaimSpan;

/// How many claims can be under way at once.
const CONNECTIONS: usize = 2;

/// A claim for a connection to run.
pub(super) struct Task {
    /// Numbered as the fetcher sends them.
    pub(super) number: u64,
    /// The connection it went to (set by [`Line::send`]).
    connection: usize,
    /// An early claim (see the early reserve's room, in `fetcher.rs`), not one of the fetcher's batches.
    pub(super) early: bool,
    pub(super) claim: Claim,
}

impl Task {
    pub(super) fn new(number: u64, early: bool, claim: Claim) -> Self {
        Task {
            number,
            connection: 0,
            early,
            claim,
        }
    }
}

/// A claim that ran, and what it took.
pub(super) struct Report {
    pub(super) task: Task,
    /// When it was sent to the database.
    pub(super) started: Instant,
    /// Its round trip.
    pub(super) took: Duration,
    pub(super) claimed: Result<Claimed, Failed>,
    /// It failed for want of a connection (see `Db::lost_connection`), or
    /// it panicked: either was logged already.
    pub(super) lost: bool,
}

/// Why a claim took nothing.
#[derive(Debug)]
pub(super) enum Failed {
    /// The database refused it, or the connection failed.
    Database(jobqueue_core::Error),
    /// The claim panicked (a bug): its connection was dropped, and the
    /// next claim on it connects again.
    Panicked(String),
}

impl std::fmt::Display for Failed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Failed::Database(e) => e.fmt(f),
            Failed::Panicked(message) => write!(f, "the claim panicked: {message}"),
        }
    }
}

/// One claim connection, as the fetcher sees it.
struct Connection {
    tasks: Sender<Task>,
    /// Its connection: the thread's while it runs a claim, the fetcher's
    /// for its reads while it is idle (never both: see `Line::with_idle`).
    db: Arc<Mutex<Db>>,
    /// A claim sent to it has not reported yet.
    busy: bool,
    /// Its thread is gone: nothing is sent to it again.
    gone: bool,
}

impl Connection {
    fn idle(&self) -> bool {
        !self.busy && !self.gone
    }
}

/// The fetcher's end: the connections, and where their reports come back.
pub(super) struct Line {
    connections: Vec<Connection>,
    reports: Receiver<Report>,
}

impl Line {
    /// Starts the connections' threads.
    pub(super) fn start(shared: &Arc<Shared>) -> std::io::Result<(Line, Vec<JoinHandle<()>>)> {
        let (reports_tx, reports) = unbounded();
        let mut connections = Vec::with_capacity(CONNECTIONS);
        let mut threads = Vec::with_capacity(CONNECTIONS);
        for n in 0..CONNECTIONS {
            let (tasks, tasks_rx) = unbounded();
            let db = Arc::new(Mutex::new(Db::new(shared, "claims")));
            let (shared, thread_db, reports) =
                (Arc::clone(shared), Arc::clone(&db), reports_tx.clone());
            threads.push(
                std::thread::Builder::new()
                    .name(format!("jobqueue-claims-{n}"))
                    .spawn(move || run(&shared, &thread_db, &tasks_rx, &reports))?,
            );
            connections.push(Connection {
                tasks,
                db,
                busy: false,
                gone: false,
            });
        }
        Ok((
            Line {
                connections,
                reports,
            },
            threads,
        ))
    }

    /// Connections with no claim under way.
    pub(super) fn idle(&self) -> usize {
        self.connections.iter().filter(|c| c.idle()).count()
    }

    /// Hands `task` to an idle connection; false when none takes it. A
    /// connection whose thread is gone (it panicked outside a claim)
    /// is set aside, so a claim is never sent to it again.
    pub(super) fn send(&mut self, mut task: Task) -> bool {
        while let Some(n) = self.connections.iter().position(Connection::idle) {
            task.connection = n;
            match self.connections[n].tasks.send(task) {
                Ok(()) => {
                    self.connections[n].busy = true;
                    return true;
                }
                Err(gone) => {
                    task = gone.into_inner();
                    self.connections[n].gone = true;
                    let left = self.connections.iter().filter(|c| !c.gone).count();
                    if left == 0 {
                        log::error!(
                            "every claim connection's thread is gone (see the panic logged \
                             before): this runner claims no more jobs; restart it"
                        );
                    } else {
                        log::error!("a claim connection's thread is gone; {left} left");
                    }
                }
            }
        }
        false
    }

    /// Runs `read` on an idle connection, on the caller's thread; `None`
    /// when every connection has a claim under way. An idle connection's
    /// thread waits for its next claim without holding the connection, so
    /// this never waits for a claim.
    pub(super) fn with_idle<T>(&self, read: impl FnOnce(&mut Db) -> T) -> Option<T> {
        let connection = self.connections.iter().find(|c| c.idle())?;
        Some(read(&mut lock(&connection.db)))
    }

    /// The reports of claims under way.
    pub(super) fn reports(&self) -> &Receiver<Report> {
        &self.reports
    }

    /// `report` came back: its connection is idle again.
    pub(super) fn returned(&mut self, report: &Report) {
        if let Some(connection) = self.connections.get_mut(report.task.connection) {
            connection.busy = false;
        }
    }

    /// No more claims: each connection ends once its claim under way, if
    /// any, has reported.
    pub(super) fn close(&mut self) {
        self.connections.clear();
    }
}

/// A connection's thread: runs each claim it gets and reports it, until the
/// fetcher closes the line (or is gone: what a claim took then is left to
/// its leases' expiry).
fn run(shared: &Shared, db: &Mutex<Db>, tasks: &Receiver<Task>, reports: &Sender<Report>) {
    for task in tasks {
        let mut db = lock(db);
        let started = Instant::now();
        let span = ClaimSpan::enter(if task.early { "early" } else { "fetcher" }, &task.claim);
        let ran = catch_unwind(AssertUnwindSafe(|| {
            db.run(&shared.health, |session| session.claim_paced(&task.claim))
        }));
        let (claimed, lost) = match ran {
            Ok(Ok(claimed)) => {
                span.claimed(claimed.rows.len());
                (Ok(claimed), false)
            }
            Ok(Err(e)) => (Err(Failed::Database(e)), db.lost_connection()),
            Err(panic) => {
                let message = panic_message(panic.as_ref());
                log::error!("a claim panicked: {message}; its connection is made again");
                // The session may be in any state: the next claim connects
                // again.
                *db = Db::new(shared, "claims");
                (Err(Failed::Panicked(message)), true)
            }
        };
        // Let go of the connection before reporting: once the report is
        // in, the fetcher may use it for its reads.
        drop(db);
        let report = Report {
            task,
            started,
            took: started.elapsed(),
            claimed,
            lost,
        };
        if reports.send(report).is_err() {
            break;
        }
    }
}
