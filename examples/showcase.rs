//! The showcase: enqueue a mix of jobs in a transaction, work them from four
//! threads with batched SKIP LOCKED claims, retry the flaky ones with backoff,
//! recover a job whose worker "died", and print what happened.
//!
//! Run with `cargo run --release --example showcase`. Uses the server of
//! `DATABASE_URL`, else the one at 127.0.0.1:5432 (user `postgres`); works in
//! a database of its own (`jobqueue_showcase`, recreated on every run).
//!
//! It drives the engine's building blocks (`jobqueue::unstable::engine`: claim,
//! complete, fail, rescue) by hand to show what a runner does; an
//! application's worker uses the runner instead (`app_worker.rs`).

use std::error::Error;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use diesel::prelude::*;
use jobqueue::unstable::engine::{Claim, Failure, claim, complete_many, fail_many, rescue_stale};
use jobqueue::{
    Counting, Job, JobOptions, JobStatus, NewJob, RetryPolicy, enqueue_many, list_queues,
};
use serde::{Deserialize, Serialize};

#[derive(Serialize, Deserialize, Job)]
#[job(type = "email.send", priority = 150, queue = "mail", max_attempts = 5)]
struct SendEmail {
    to: String,
    subject: String,
}

#[derive(Serialize, Deserialize, Job)]
#[job(type = "image.resize", queue = "media")]
struct ResizeImage {
    image_id: u64,
    width: u32,
}

/// Fails on every attempt when `always_fails`, so it ends dead-lettered.
#[derive(Serialize, Deserialize, Job)]
#[job(type = "crm.sync", priority = 50, max_attempts = 3)]
struct SyncCrm {
    account: u64,
    always_fails: bool,
}

const DATABASE: &str = "jobqueue_showcase";

fn main() -> Result<(), Box<dyn Error>> {
    let server = std::env::var("DATABASE_URL")
        .ok()
        .filter(|url| !url.trim().is_empty())
        .unwrap_or_else(|| "postgres://postgres@127.0.0.1:5432/postgres".to_owned());
    let url = fresh_database(&server)?;
    let mut conn = PgConnection::establish(&url)?;
    jobqueue::run_migrations(&mut conn)?;
    println!("database: {url}");

    // 1. Enqueue a mix, atomically with the "application's" own work.
    let started = Instant::now();
    let jobs = conn.transaction::<_, jobqueue::Error, _>(|conn| {
        let mut jobs = Vec::new();
        for i in 0..1500u64 {
            let email = SendEmail {
                to: format!("user{i}@example.com"),
                subject: "Welcome".into(),
            };
            jobs.push(NewJob::from_job(&email, JobOptions::new())?);
        }
        for i in 0..800u64 {
            let resize = ResizeImage {
                image_id: i,
                width: 640,
            };
            let options = JobOptions::new().priority(if i % 10 == 0 { 500 } else { 100 });
            jobs.push(NewJob::from_job(&resize, options)?);
        }
        for i in 0..200u64 {
            let sync = SyncCrm {
                account: i,
                always_fails: i % 50 == 0,
            };
            jobs.push(NewJob::from_job(&sync, JobOptions::new())?);
        }
        for i in 0..100u64 {
            let later = SendEmail {
                to: format!("digest{i}@example.com"),
                subject: "Your digest".into(),
            };
            jobs.push(NewJob::from_job(
                &later,
                JobOptions::new().delay(Duration::from_secs(2)),
            )?);
        }
        enqueue_many(conn, &jobs)
    })?;
    println!(
        "enqueued {} jobs in one statement in {:.1} ms",
        jobs.inserted.len(),
        started.elapsed().as_secs_f64() * 1e3
    );

    // 2. A worker claims a job and "dies": its lease runs out, the job is recovered.
    let lost = claim(
        &mut conn,
        &Claim::new("crashed-worker")
            .lease(Duration::from_millis(200))
            .limit(1),
    )?;
    std::thread::sleep(Duration::from_millis(300));
    let rescued = rescue_stale(&mut conn, 100)?;
    println!(
        "worker crashed holding {} job; recovered {} after its lease expired",
        lost.len(),
        rescued.requeued.len()
    );

    // 3. Four workers drain the queue: batched claims, batched completions.
    let work_started = Instant::now();
    let completed = Arc::new(AtomicUsize::new(0));
    let retried = Arc::new(AtomicUsize::new(0));
    let policy = RetryPolicy {
        base: Duration::from_millis(200),
        max: Duration::from_secs(2),
        jitter: 0.2,
    };
    let workers: Vec<_> = (0..4)
        .map(|w| {
            let url = url.clone();
            let completed = Arc::clone(&completed);
            let retried = Arc::clone(&retried);
            std::thread::spawn(move || -> Result<(), jobqueue::Error> {
                let mut conn = PgConnection::establish(&url)?;
                let request = Claim::new(format!("showcase-{w}")).limit(50);
                let mut idle_since = Instant::now();
                while idle_since.elapsed() < Duration::from_secs(3) {
                    let batch = claim(&mut conn, &request)?;
                    if batch.is_empty() {
                        std::thread::sleep(Duration::from_millis(20));
                        continue;
                    }
                    idle_since = Instant::now();
                    let mut done = Vec::new();
                    let mut failures = Vec::new();
                    for job in &batch {
                        if job.job_type == SyncCrm::JOB_TYPE {
                            let sync: SyncCrm = job.payload_as()?;
                            if sync.always_fails || job.attempts == 1 {
                                failures.push(Failure::retry(
                                    job.lease(),
                                    "CRM answered 503",
                                    &policy,
                                ));
                                continue;
                            }
                        }
                        done.push(job.lease());
                    }
                    completed.fetch_add(
                        complete_many(&mut conn, &done)?.applied.len(),
                        Ordering::Relaxed,
                    );
                    retried.fetch_add(
                        fail_many(&mut conn, &failures)?.outcomes.len(),
                        Ordering::Relaxed,
                    );
                }
                Ok(())
            })
        })
        .collect();
    for worker in workers {
        worker.join().map_err(|_| "a worker thread panicked")??;
    }
    let busy = work_started.elapsed().as_secs_f64() - 3.0;
    println!(
        "worked {} completions and {} failed attempts in {:.2} s of work",
        completed.load(Ordering::Relaxed),
        retried.load(Ordering::Relaxed),
        busy.max(0.0)
    );

    // 4. Where everything ended up.
    println!(
        "\n{:<10} {:>9} {:>9} {:>9} {:>9}",
        "queue", "pending", "running", "completed", "failed"
    );
    for queue in list_queues(&mut conn, Counting::WithHistory)? {
        println!(
            "{:<10} {:>9} {:>9} {:>9} {:>9}",
            queue.queue,
            queue.count(JobStatus::Pending),
            queue.count(JobStatus::Claimed) + queue.count(JobStatus::Running),
            queue.count(JobStatus::Completed),
            queue.count(JobStatus::Failed)
        );
    }
    Ok(())
}

/// Recreates the showcase's own database on `server` (a `postgres://` URL);
/// returns its URL.
fn fresh_database(server: &str) -> Result<String, Box<dyn Error>> {
    let mut admin = PgConnection::establish(server)?;
    diesel::sql_query(format!("DROP DATABASE IF EXISTS {DATABASE} WITH (FORCE)"))
        .execute(&mut admin)?;
    diesel::sql_query(format!("CREATE DATABASE {DATABASE}")).execute(&mut admin)?;
    // The server's URL with the showcase's database in its path.
    let (head, query) = server.split_once('?').unwrap_or((server, ""));
    let authority = head.find("://").map_or(0, |i| i + 3);
    let base = head[authority..]
        .find('/')
        .map_or(head, |slash| &head[..authority + slash]);
    let query = if query.is_empty() {
        String::new()
    } else {
        format!("?{query}")
    };
    Ok(format!("{base}/{DATABASE}{query}"))
}
