//! The guide's async patterns (docs/src/async.md), run: a blocking r2d2
//! pool used from async code through `spawn_blocking`, deadpool-diesel's
//! `interact` for the same, and a handler that
//! awaits async work through a tokio runtime `Handle` in the application's
//! state (the runner's workers are OS threads).

use std::time::Duration;

use diesel::connection::SimpleConnection;
use diesel::r2d2::{ConnectionManager, Pool};
use diesel::sql_types::Text;
use diesel::{Connection, PgConnection};
use diesel_async::AsyncPgConnection;
use diesel_async::pooled_connection::AsyncDieselConnectionManager;
use diesel_async::pooled_connection::deadpool::Pool as AsyncPool;
use jobqueue::prelude::*;
use jobqueue::{Registry, RunnerConfig};
use jobqueue_tests::{TestDb, WAIT_LIMIT, count_where, scalar, start_runner, wait_for};
use serde::{Deserialize, Serialize};

type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// Greets an address: records it in `greeted`, through async code.
#[derive(Debug, Serialize, Deserialize, Job)]
#[job(type = "greet", queue = "mail")]
struct Greet {
    to: String,
}

/// A blocking (r2d2) pool used from async code: the work on a blocking
/// thread of the runtime, never on one of its executor threads.
async fn greet_later(
    pool: Pool<ConnectionManager<PgConnection>>,
    to: String,
) -> Result<JobId, BoxError> {
    tokio::task::spawn_blocking(move || -> Result<JobId, BoxError> {
        let mut conn = pool.get()?;
        let outcome = conn.transaction(|conn| Greet { to }.enqueue(conn))?;
        Ok(outcome.id())
    })
    .await?
}

/// A deadpool-diesel pool of blocking connections from async code: the
/// transaction runs inside `interact`, on a blocking thread of the runtime.
async fn greet_through_interact(
    pool: &deadpool_diesel::postgres::Pool,
    to: String,
) -> Result<JobId, BoxError> {
    let conn = pool.get().await?;
    let outcome = conn
        .interact(move |conn| conn.transaction(|conn| Greet { to }.enqueue(conn)))
        .await
        .map_err(|e| e.to_string())??;
    Ok(outcome.id())
}

/// The application's async side, in the runner's state for its handlers.
struct AsyncApp {
    runtime: tokio::runtime::Handle,
    pool: AsyncPool<AsyncPgConnection>,
}

impl AsyncApp {
    async fn record(&self, to: &str) -> Result<(), BoxError> {
        use diesel_async::RunQueryDsl;
        let mut conn = self.pool.get().await?;
        diesel::sql_query("INSERT INTO greeted (email) VALUES ($1)")
            .bind::<Text, _>(to)
            .execute(&mut conn)
            .await?;
        Ok(())
    }
}

impl Perform for Greet {
    fn perform(&self, ctx: &mut JobContext<'_>) -> Result<(), JobError> {
        let app = ctx.state::<AsyncApp>()?;
        // This worker thread waits for the future; the runtime's own
        // threads drive it (and everything else) meanwhile.
        app.runtime.block_on(app.record(&self.to))?;
        Ok(())
    }
}

#[test]
fn a_blocking_pool_enqueues_from_async_code_and_a_handler_awaits_through_the_runtime() {
    let db = TestDb::new();
    let mut conn = db.conn();
    conn.batch_execute("CREATE TABLE greeted (email text NOT NULL)")
        .expect("create greeted");
    let runtime = tokio::runtime::Runtime::new().expect("a tokio runtime");

    let blocking = Pool::builder()
        .max_size(2)
        .build(ConnectionManager::<PgConnection>::new(&db.url))
        .expect("an r2d2 pool");
    let id = runtime
        .block_on(greet_later(blocking, "a@example.com".into()))
        .expect("enqueue through spawn_blocking");

    let manager = AsyncDieselConnectionManager::<AsyncPgConnection>::new(&db.url);
    let app = AsyncApp {
        runtime: runtime.handle().clone(),
        pool: AsyncPool::builder(manager)
            .max_size(2)
            .build()
            .expect("a deadpool pool"),
    };
    let mut config = RunnerConfig::new(&db.url)
        .keep_completed(jobqueue_tests::KEEP_COMPLETED)
        .concurrency(2);
    config.poll_interval = Duration::from_millis(100);
    let runner = start_runner(config, Registry::new().state(app).register::<Greet>());
    wait_for("the greeting recorded", WAIT_LIMIT, || {
        scalar(
            &mut conn,
            "SELECT count(*) AS n FROM greeted WHERE email = 'a@example.com'",
        ) == 1
    });
    runner.shutdown();
    assert_eq!(
        count_where(&mut conn, &format!("id = '{id}' AND status = 'completed'")),
        1
    );
}

#[test]
fn deadpool_diesel_interact_enqueues_in_a_transaction_from_async_code() {
    let db = TestDb::new();
    let mut conn = db.conn();
    let runtime = tokio::runtime::Runtime::new().expect("a tokio runtime");
    // The pool's connections are closed on the runtime's blocking threads,
    // also when the pool is dropped: within the runtime's context.
    let _context = runtime.enter();
    let manager =
        deadpool_diesel::postgres::Manager::new(&db.url, deadpool_diesel::Runtime::Tokio1);
    let pool = deadpool_diesel::postgres::Pool::builder(manager)
        .max_size(2)
        .build()
        .expect("a deadpool-diesel pool");
    let id = runtime
        .block_on(greet_through_interact(&pool, "b@example.com".into()))
        .expect("enqueue through interact");
    assert_eq!(
        count_where(&mut conn, &format!("id = '{id}' AND job_type = 'greet'")),
        1
    );
    // A transaction that fails after its enqueue leaves no job.
    let failed: Result<(), BoxError> = runtime.block_on(async {
        let pooled = pool.get().await?;
        pooled
            .interact(|conn| {
                conn.transaction(|conn| -> Result<(), diesel::result::Error> {
                    Greet {
                        to: "c@example.com".into(),
                    }
                    .enqueue(conn)?;
                    Err(diesel::result::Error::RollbackTransaction)
                })
            })
            .await
            .map_err(|e| e.to_string())??;
        Ok(())
    });
    assert!(failed.is_err());
    assert_eq!(count_where(&mut conn, "job_type = 'greet'"), 1);
}
