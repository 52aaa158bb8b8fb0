//! Job types the testing kit's own tests (`tests/it/kit_*.rs`) enqueue,
//! assert on, drain and perform, and the registry that handles them.

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use diesel::connection::SimpleConnection;
use diesel::prelude::*;
use diesel::sql_types::{Array, Text};
use jobqueue_core::Job;
use jobqueue_runner::{JobContext, JobError, Perform, Registry};
use serde::{Deserialize, Serialize};

/// A welcome email: asserted on; its handler does nothing.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Job)]
#[job(type = "kit.welcome", queue = "mail", priority = 150)]
pub struct Welcome {
    /// The address.
    pub to: String,
}

impl Perform for Welcome {
    fn perform(&self, _ctx: &mut JobContext<'_>) -> Result<(), JobError> {
        Ok(())
    }
}

/// A job of a type no registry of the tests handles.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Job)]
#[job(type = "kit.orphan")]
pub struct Orphan {}

/// A job that does what it is told: one of each outcome, and the ways a
/// handler reaches its context. Three attempts, 1 s backoff doubling.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Job)]
#[job(
    type = "kit.act",
    max_attempts = 3,
    backoff_base_ms = 1000,
    backoff_max_secs = 60
)]
pub enum Act {
    /// Succeeds.
    Complete,
    /// Fails with "try again", every attempt.
    Retry,
    /// Fails for good.
    Permanent,
    /// Snoozes for 30 s.
    Snooze,
    /// Says it stopped on a cancel request.
    Cancel,
    /// Stops on a cancel request if it sees one; else succeeds.
    WatchCancel,
    /// Panics.
    Panic,
    /// Reports progress three times, adds two events, then succeeds.
    Progress,
    /// A workflow step: records as its result `n` plus step `base`'s
    /// result (a number; none counts 0) plus the number of its parents.
    Sum {
        /// Its own part.
        n: i64,
    },
    /// Enqueues `Spawn { left: left - 1 }` while `left` is above zero.
    Spawn {
        /// How many descendants are left to enqueue.
        left: u32,
    },
    /// Enqueues itself again, forever.
    Again,
    /// Writes `note` to `kit_notes` and completes in one transaction.
    Write {
        /// The note.
        note: String,
    },
    /// Writes a note, then runs a statement that fails, and fails with it.
    BadStatement,
    /// Adds one to the registry's [`Counter`].
    Count,
    /// Fails on every attempt before attempt `n`.
    SucceedOnAttempt(i32),
    /// Says whether it sees a shutdown: fails with "shutting down" if so.
    Shutdown,
}

/// The application state of [`registry`]: how many `Act::Count` jobs ran.
#[derive(Debug, Default, Clone)]
pub struct Counter(pub Arc<AtomicU32>);

impl Perform for Act {
    fn perform(&self, ctx: &mut JobContext<'_>) -> Result<(), JobError> {
        match self {
            Act::Complete => Ok(()),
            Act::Retry => Err(JobError::retry("try again")),
            Act::Permanent => Err(JobError::fail("never")),
            Act::Snooze => Err(JobError::snooze(Duration::from_secs(30))),
            Act::Cancel => Err(JobError::Cancelled),
            Act::WatchCancel if ctx.is_cancelled() => Err(JobError::Cancelled),
            Act::WatchCancel => Ok(()),
            Act::Panic => panic!("the handler blew up"),
            Act::Progress => {
                ctx.progress(10, "download")?;
                ctx.events(2)?;
                ctx.progress(90, "upload")?;
                Ok(())
            }
            Act::Spawn { left } => {
                if *left > 0 {
                    Act::Spawn { left: left - 1 }.enqueue(ctx.conn()?)?;
                }
                Ok(())
            }
            Act::Again => {
                Act::Again.enqueue(ctx.conn()?)?;
                Ok(())
            }
            Act::Write { note } => ctx.complete_in_transaction(|conn| {
                write_note(conn, note)?;
                Ok(())
            }),
            Act::BadStatement => {
                let conn = ctx.conn()?;
                write_note(conn, "before the bad statement")?;
                conn.batch_execute("SELECT * FROM no_such_table")?;
                Ok(())
            }
            Act::Count => {
                ctx.state::<Counter>()?.0.fetch_add(1, Ordering::Relaxed);
                Ok(())
            }
            Act::SucceedOnAttempt(n) if ctx.attempt() < *n => {
                Err(JobError::retry(format!("attempt {}", ctx.attempt())))
            }
            Act::SucceedOnAttempt(_) => Ok(()),
            Act::Sum { n } => {
                let base: Option<i64> = ctx.parent_result("base")?;
                let parents = ctx.parent_results()?.len() as i64;
                ctx.set_result(&(n + base.unwrap_or(0) + parents))
            }
            Act::Shutdown if ctx.is_shutting_down() => Err(JobError::retry("shutting down")),
            Act::Shutdown => Ok(()),
        }
    }
}

/// The tests' registry: [`Welcome`] and [`Act`], with `counter` as its
/// application state.
pub fn registry(counter: &Counter) -> Registry {
    Registry::new()
        .state(counter.clone())
        .register::<Welcome>()
        .register::<Act>()
}

/// Creates `kit_notes`, the table `Act::Write` writes to (inside the
/// test's transaction, like everything else).
pub fn create_notes(conn: &mut PgConnection) {
    conn.batch_execute("CREATE TABLE kit_notes (note text NOT NULL)")
        .expect("create kit_notes");
}

/// The notes written, in order.
pub fn notes(conn: &mut PgConnection) -> Vec<String> {
    #[derive(QueryableByName)]
    struct Notes {
        #[diesel(sql_type = Array<Text>)]
        notes: Vec<String>,
    }
    diesel::sql_query(
        "SELECT coalesce(array_agg(note ORDER BY note), '{}') AS notes FROM kit_notes",
    )
    .get_result::<Notes>(conn)
    .expect("read kit_notes")
    .notes
}

fn write_note(conn: &mut PgConnection, note: &str) -> QueryResult<usize> {
    diesel::sql_query("INSERT INTO kit_notes (note) VALUES ($1)")
        .bind::<Text, _>(note)
        .execute(conn)
}

/// The message of the panic `f` must end in (an assertion that fails).
pub fn failure(f: impl FnOnce()) -> String {
    let panic = std::panic::catch_unwind(std::panic::AssertUnwindSafe(f))
        .expect_err("the assertion should have failed");
    panic
        .downcast_ref::<String>()
        .cloned()
        .or_else(|| panic.downcast_ref::<&str>().map(|s| (*s).to_owned()))
        .unwrap_or_else(|| "a non-string panic payload".to_owned())
}
