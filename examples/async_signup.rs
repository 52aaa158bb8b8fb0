//! An async web service that enqueues in its own transactions: axum on
//! tokio, a diesel-async connection pool (deadpool), and the runner of its
//! jobs in the same process, on its own threads.
//!
//! `POST /signup` with a form body `email=...` inserts a user and enqueues
//! its welcome mail in ONE transaction: both commit, or neither does. The
//! runner performs the mail (here: marks the user `welcomed`). SIGTERM or
//! Ctrl-C stops the server gracefully (requests in flight finish), then the
//! runner (jobs in flight get its grace period).
//!
//! ```sh
//! DATABASE_URL=postgres://localhost/app cargo run --example async_signup -- --listen 127.0.0.1:3000
//! curl -d email=a@example.com http://127.0.0.1:3000/signup                          # 201
//! curl -d email=a@example.com http://127.0.0.1:3000/signup                          # 409: taken
//! curl -d email=b@example.com 'http://127.0.0.1:3000/signup?fail_after_enqueue=1'   # 500
//! ```
//!
//! The last two fail after the job was enqueued, and leave neither a user
//! nor a job: a taken address is found at commit (the unique constraint is
//! deferred), the flag fails the request just before it.

use std::net::SocketAddr;
use std::process::ExitCode;
use std::time::Duration;

use axum::Router;
use axum::extract::{Form, Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use diesel::connection::SimpleConnection;
use diesel::sql_types::{BigInt, Text};
use diesel::{Connection as _, PgConnection, QueryableByName};
use diesel_async::pooled_connection::AsyncDieselConnectionManager;
use diesel_async::pooled_connection::deadpool::Pool;
use diesel_async::{AsyncConnection, AsyncPgConnection, RunQueryDsl as _};
use jobqueue::prelude::*;
use jobqueue::{Registry, Runner, RunnerConfig};
use serde::{Deserialize, Serialize};

/// The application's table. The unique constraint on `email` is checked at
/// commit, so a taken address fails the transaction after its enqueue.
const USERS_TABLE: &str = "
    CREATE TABLE IF NOT EXISTS users (
        id bigserial PRIMARY KEY,
        email text NOT NULL,
        welcomed boolean NOT NULL DEFAULT false,
        CONSTRAINT users_email_key UNIQUE (email) DEFERRABLE INITIALLY DEFERRED
    )";

/// Welcomes a new user: here, marks the user welcomed.
#[derive(Debug, Serialize, Deserialize, Job)]
#[job(type = "email.welcome", queue = "mail", max_attempts = 5)]
struct Welcome {
    user_id: i64,
    email: String,
}

impl Perform for Welcome {
    fn perform(&self, ctx: &mut JobContext<'_>) -> Result<(), JobError> {
        // A runner's handler runs on one of its worker threads, with
        // a blocking connection of the runner's handler pool (so the
        // blocking `diesel::RunQueryDsl`, not diesel-async's).
        let welcome = diesel::sql_query("UPDATE users SET welcomed = true WHERE id = $1")
            .bind::<BigInt, _>(self.user_id);
        diesel::RunQueryDsl::execute(welcome, ctx.conn()?)?;
        Ok(())
    }
}

/// The form `POST /signup` takes.
#[derive(Debug, Deserialize)]
struct Signup {
    email: String,
}

/// `POST /signup`'s query: `?fail_after_enqueue=1` fails the request after
/// the enqueue, to show that the transaction takes the job with it.
#[derive(Debug, Default, Deserialize)]
struct Flags {
    #[serde(default)]
    fail_after_enqueue: u8,
}

/// Why a signup failed; each answers its own status.
#[derive(Debug, thiserror::Error)]
enum SignupError {
    /// The address is already taken (found at commit).
    #[error("{0} is already signed up")]
    Taken(String),
    /// Asked for with `?fail_after_enqueue=1`.
    #[error("failed after the enqueue, as asked: nothing was kept")]
    Asked,
    /// No connection from the pool.
    #[error("no database connection: {0}")]
    Pool(String),
    /// The database refused a statement.
    #[error("database: {0}")]
    Database(#[from] diesel::result::Error),
    /// The queue refused the job.
    #[error("enqueue: {0}")]
    Queue(#[from] jobqueue::Error),
}

impl IntoResponse for SignupError {
    fn into_response(self) -> Response {
        let status = match self {
            SignupError::Taken(_) => StatusCode::CONFLICT,
            SignupError::Pool(_) => StatusCode::SERVICE_UNAVAILABLE,
            SignupError::Asked | SignupError::Database(_) | SignupError::Queue(_) => {
                StatusCode::INTERNAL_SERVER_ERROR
            }
        };
        (status, format!("{self}\n")).into_response()
    }
}

/// Whether `error` is the unique constraint on `users.email`.
fn is_taken(error: &diesel::result::Error) -> bool {
    use diesel::result::{DatabaseErrorKind, Error};
    matches!(
        error,
        Error::DatabaseError(DatabaseErrorKind::UniqueViolation, info)
            if info.constraint_name() == Some("users_email_key")
    )
}

#[derive(QueryableByName)]
struct NewUser {
    #[diesel(sql_type = BigInt)]
    id: i64,
}

/// `POST /signup`: the user and its welcome job, in one transaction.
async fn signup(
    State(pool): State<Pool<AsyncPgConnection>>,
    Query(flags): Query<Flags>,
    Form(form): Form<Signup>,
) -> Result<(StatusCode, String), SignupError> {
    let mut conn = pool
        .get()
        .await
        .map_err(|e| SignupError::Pool(e.to_string()))?;
    let email = form.email.trim().to_owned();
    let user_id = conn
        .transaction::<_, SignupError, _>(async |conn| {
            let user = diesel::sql_query("INSERT INTO users (email) VALUES ($1) RETURNING id")
                .bind::<Text, _>(&email)
                .get_result::<NewUser>(conn)
                .await?;
            Welcome {
                user_id: user.id,
                email: email.clone(),
            }
            .enqueue_async(conn)
            .await?;
            if flags.fail_after_enqueue != 0 {
                return Err(SignupError::Asked);
            }
            Ok(user.id)
        })
        .await
        .map_err(|e| match e {
            SignupError::Database(e) if is_taken(&e) => SignupError::Taken(email.clone()),
            other => other,
        })?;
    Ok((StatusCode::CREATED, format!("user {user_id}\n")))
}

/// Resolves on SIGTERM or SIGINT (Ctrl-C).
async fn stop_signal() {
    use tokio::signal::unix::{SignalKind, signal};
    let (Ok(mut term), Ok(mut int)) = (
        signal(SignalKind::terminate()),
        signal(SignalKind::interrupt()),
    ) else {
        eprintln!("cannot listen for SIGTERM and SIGINT; stopping");
        return;
    };
    tokio::select! {
        _ = term.recv() => {}
        _ = int.recv() => {}
    }
}

/// Serves until a stop signal, then lets requests in flight finish.
async fn serve(url: &str, listen: SocketAddr) -> Result<(), Box<dyn std::error::Error>> {
    let manager = AsyncDieselConnectionManager::<AsyncPgConnection>::new(url);
    let pool = Pool::builder(manager).max_size(8).build()?;
    let app = Router::new()
        .route("/signup", post(signup))
        .with_state(pool);
    let listener = tokio::net::TcpListener::bind(listen).await?;
    // The bound address (with `--listen 127.0.0.1:0`, the port chosen).
    println!("listening on {}", listener.local_addr()?);
    axum::serve(listener, app)
        .with_graceful_shutdown(stop_signal())
        .await?;
    Ok(())
}

/// The jobqueue schema (migrations) and the application's table.
fn prepare(url: &str) -> Result<(), Box<dyn std::error::Error>> {
    let mut conn = PgConnection::establish(url)?;
    jobqueue::run_migrations(&mut conn)?;
    conn.batch_execute(USERS_TABLE)?;
    Ok(())
}

/// `--listen ADDR` (default 127.0.0.1:3000).
fn listen_address() -> Result<SocketAddr, String> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.as_slice() {
        [] => Ok(SocketAddr::from(([127, 0, 0, 1], 3000))),
        [flag, addr] if flag == "--listen" => {
            addr.parse().map_err(|e| format!("--listen {addr}: {e}"))
        }
        _ => Err("usage: async_signup [--listen ADDR]".into()),
    }
}

fn run() -> Result<(), Box<dyn std::error::Error>> {
    let listen = listen_address()?;
    let url = std::env::var("DATABASE_URL").map_err(|_| "DATABASE_URL is not set")?;
    prepare(&url)?;
    // The runner works on its own threads, beside the tokio runtime's.
    let runner = Runner::new(
        // Completed jobs' rows are kept a day, for `jobqueue list` and
        // the dashboard to show.
        RunnerConfig::new(&url)
            .concurrency(4)
            .keep_completed(Duration::from_secs(24 * 3600)),
        Registry::new().register::<Welcome>(),
    )
    .start()?;
    let runtime = tokio::runtime::Runtime::new()?;
    let served = runtime.block_on(serve(&url, listen));
    // Server stopped (or failed to start): stop the runner either way.
    let summary = runner.shutdown();
    served?;
    if !summary.panicked_threads.is_empty() {
        return Err(format!("runner threads panicked: {:?}", summary.panicked_threads).into());
    }
    Ok(())
}

fn main() -> ExitCode {
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("async_signup: {e}");
            ExitCode::FAILURE
        }
    }
}
