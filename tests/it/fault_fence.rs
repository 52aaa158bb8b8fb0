//! Fault injection, a primary fenced under a handler's open transaction:
//! the transaction began read-write before the fence, and its commit waits
//! for a synchronous standby that will never answer (as after a failover,
//! when the standby was promoted away). The runner's own threads find the
//! server read-only at their next write; the handler's connection to that
//! server must then be closed, or the handler waits at its commit for good
//! while the runner keeps renewing its job's lease.

use std::sync::{Condvar, Mutex};
use std::time::Duration;

use diesel::connection::SimpleConnection;
use diesel::prelude::*;
use jobqueue_core::Job;
use jobqueue_runner::{JobContext, JobError, Perform, Registry, Runner, RunnerConfig};
use jobqueue_tests::fault::OwnCluster;
use jobqueue_tests::wait_for;
use serde::{Deserialize, Serialize};

/// Where the handler is: 0 not started, 1 in its transaction waiting for
/// the fence, 2 committing, 3 its commit failed, 4 its commit succeeded;
/// each change is signalled.
static STAGE: (Mutex<u8>, Condvar) = (Mutex::new(0), Condvar::new());

fn set_stage(stage: u8) {
    *STAGE.0.lock().unwrap_or_else(|e| e.into_inner()) = stage;
    STAGE.1.notify_all();
}

fn stage() -> u8 {
    *STAGE.0.lock().unwrap_or_else(|e| e.into_inner())
}

#[derive(Debug, Serialize, Deserialize, Job)]
#[job(type = "test.fenced-commit", max_attempts = 1)]
struct FencedCommit;

impl Perform for FencedCommit {
    fn perform(&self, ctx: &mut JobContext<'_>) -> Result<(), JobError> {
        let conn = ctx.conn()?;
        let committed = conn.transaction::<_, diesel::result::Error, _>(|conn| {
            conn.batch_execute("INSERT INTO test_effects (job_id, attempt, kind) VALUES (gen_random_uuid(), 1, 'fenced')")?;
            set_stage(1);
            // Until the test has fenced the server.
            let waiting = STAGE.0.lock().unwrap_or_else(|e| e.into_inner());
            drop(
                STAGE
                    .1
                    .wait_while(waiting, |stage| *stage == 1)
                    .unwrap_or_else(|e| e.into_inner()),
            );
            Ok(())
        });
        set_stage(if committed.is_ok() { 4 } else { 3 });
        committed.map_err(JobError::retry)
    }
}

/// Runs each `ALTER SYSTEM` statement (one per call: none runs in a
/// transaction block), then reloads the configuration.
fn settle(admin: &mut PgConnection, statements: &[&str]) {
    for statement in statements.iter().chain(&["SELECT pg_reload_conf()"]) {
        admin
            .batch_execute(statement)
            .unwrap_or_else(|e| panic!("{statement}: {e}"));
    }
}

#[test]
fn a_handler_commit_waiting_on_a_fenced_primary_is_ended() {
    let pg = OwnCluster::start();
    let mut admin = pg.conn();
    FencedCommit.enqueue(&mut admin).expect("enqueue");
    let mut config = RunnerConfig::new(&pg.url).concurrency(1);
    config.poll_interval = Duration::from_millis(100);
    config.db_timeout = Duration::from_secs(2);
    let runner = Runner::new(config, Registry::new().register::<FencedCommit>())
        .start()
        .expect("start");
    wait_for(
        "the handler in its transaction",
        Duration::from_secs(20),
        || stage() == 1,
    );
    // Commits now wait for a standby that does not exist, and new
    // transactions are read-only: the fence of a failover.
    settle(
        &mut admin,
        &[
            "ALTER SYSTEM SET synchronous_standby_names = 'gone'",
            "ALTER SYSTEM SET default_transaction_read_only = on",
        ],
    );
    wait_for("the fence in force", Duration::from_secs(10), || {
        let mut conn = pg.conn();
        conn.batch_execute("CREATE TEMP TABLE probe (x int)")
            .is_err()
    });
    set_stage(2);
    // The runner's threads write (claims, lease renewals), are refused,
    // and close the handler connections to the server with theirs.
    wait_for(
        "the handler's commit ended",
        Duration::from_secs(20),
        || stage() >= 3,
    );
    assert_eq!(stage(), 3, "the commit cannot succeed without the standby");
    settle(
        &mut admin,
        &[
            "ALTER SYSTEM RESET synchronous_standby_names",
            "ALTER SYSTEM RESET default_transaction_read_only",
        ],
    );
    runner.shutdown();
}
