//! The stateful checker (`jobqueue bench --only chaos`, and
//! `tests/it/chaos.rs` for short runs): several runner processes work a
//! PostgreSQL cluster of the checker's own while an adversary, driven by a
//! seeded random number generator, enqueues workflows, batches (with both
//! callbacks), keyed and ordered keyed jobs into rate-limited, globally
//! limited and key-limited queues; retries, cancels and deletes jobs;
//! pauses and resumes queues; changes limits; SIGKILLs runners and starts
//! new ones; and (optionally) restarts PostgreSQL.
//!
//! Every change of a job's status or claim is logged by the database
//! itself, by a trigger on `jobqueue_jobs` writing `clock_timestamp()` into
//! `chaos_log` (the runners cannot lie about it), and every change of a
//! queue's settings by a trigger on `jobqueue_queues` into `chaos_limits`.
//! Each job writes its effect in the transaction that completes it
//! (`complete_in_transaction`) into `chaos_effects`. Once the adversary
//! stops, every queue is resumed and the runners drain what is left; then
//! the oracle reads the log and checks:
//!
//! - **workflow order**: no step was claimed while one of its parents was
//!   not settled as its edge requires (completed; or ended, for an
//!   `after_finished` edge or a workflow whose failures let the rest run);
//! - **effects once**: every job that completed wrote its effect exactly
//!   once, every other job never (callbacks included), and no batch
//!   callback was cancelled that should not have been;
//! - **key limits**: at no job's admission were more of its key's jobs
//!   admitted (scheduled, pending, claimed or running) than the largest
//!   key limit of its queue in the two seconds before;
//! - **ordered keys**: each key's jobs were first claimed in enqueue order,
//!   each only after the one before it finished (jobs an operator retried
//!   are left out: a retry puts a job back in line on purpose);
//! - **global limits**: at no claim were more of a queue's jobs held than
//!   its largest limit in the two seconds before;
//! - **rate limits**: no window of the period holds more claims
//!   (`claimed_at`, what the limit counts) than the largest rate in force
//!   around it, nor more *handler starts* (what a called service sees:
//!   each attempt of a rate-limited job logs its start, the clock at the
//!   handler's entry, into `chaos_starts`), but for a window with a start later
//!   than a whole period after its claim (on a window at most half full,
//!   a late start is let through: the guide's one way past the limit);
//! - **nothing left behind**: after the drain, no job is live (blocked,
//!   waiting, scheduled, pending, set aside or held);
//! - **maintenance keeps running**: no scheduled job was promoted, and no
//!   expired lease rescued, more than 30 s late;
//! - **runners survive**: no runner process exited unless killed.
//!
//! Violations an operator's retry explains (a step run while a parent it
//! waited for runs again, retried after the step was released), and steps
//! an operator retried before a step they wait for that ended uncompleted
//! (they wait for its retry, by design; the doctor's `workflows` check
//! warns of them), are reported as notes, not findings.
//!
//! Keyed, rate-limited and limited jobs sometimes carry one of a few unique
//! keys, so enqueues also drop duplicates and re-enqueue jobs whose holder
//! finished meanwhile.
//!
//! A run is reproducible up to timing: the seed fixes the adversary's
//! program (which operation, which queue, which job among those it lists),
//! not the runners' interleavings. Replay one with `JOBQUEUE_CHAOS_SEED`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use diesel::connection::SimpleConnection;
use diesel::prelude::*;
use diesel::sql_types::{BigInt, Bool, Text, Uuid};
use jobqueue_core::{
    Batch, Error as QueueError, Job, JobId, JobOptions, KeyLimit, NewJob, OnFailure, RateLimit,
    Workflow,
};
use jobqueue_runner::{JobContext, JobError, Perform};
use serde::{Deserialize, Serialize};

use super::Row;
use crate::ToolError;
use crate::postgres::{StopMode, ThrowawayCluster};

/// The queues the adversary works: unlimited, rate-limited, globally
/// limited, key-limited and ordered (batch callbacks go to `default`).
const QUEUES: [&str; 6] = ["plain", "rated", "limited", "keyed", "ordered", "default"];
/// Keys of the key-limited queue.
const KEYS: usize = 6;
/// Keys of the ordered queue.
const ORDERED_KEYS: usize = 4;
/// How long a lowered limit may still be exceeded by a claim or an
/// admission that read it before the change committed.
const GRACE: &str = "2 seconds";
/// Later than this, a promotion or a rescue means maintenance stalled.
const MAINTENANCE_LATE: &str = "30 seconds";
/// Each finding kind shows this many examples.
const EXAMPLES: usize = 5;

/// The checker's job: works `ms`, then writes its effect and completes in
/// one transaction. `fail` 1: its first attempt fails (retried); 2: its
/// first attempt fails for good.
#[derive(Debug, Clone, Serialize, Deserialize, Job)]
#[job(type = "bench.chaos", max_attempts = 5)]
pub struct ChaosJob {
    /// The adversary's sequence number (enqueue order).
    pub seq: u64,
    /// How long it works, in milliseconds.
    pub ms: u64,
    /// 0: succeeds; 1: the first attempt fails and is retried; 2: the
    /// first attempt fails for good.
    pub fail: u8,
}

impl Perform for ChaosJob {
    fn perform(&self, ctx: &mut JobContext<'_>) -> Result<(), JobError> {
        // The start a called service would see: the handler's entry, read
        // before anything else (a connection included); the runners share
        // the database's machine and clock.
        let entered = chrono::Utc::now();
        let (id, attempt) = (ctx.job_id(), ctx.attempt());
        if ctx.queue() == "rated" {
            diesel::sql_query(
                "INSERT INTO chaos_starts (job_id, attempt, claimed_at, at)
                 SELECT $1, $2, claimed_at, $3 FROM jobqueue_jobs WHERE id = $1",
            )
            .bind::<Uuid, _>(id)
            .bind::<diesel::sql_types::Integer, _>(attempt)
            .bind::<diesel::sql_types::Timestamptz, _>(entered)
            .execute(ctx.conn()?)
            .map_err(|e| JobError::retry(format!("chaos: logging the start: {e}")))?;
        }
        std::thread::sleep(Duration::from_millis(self.ms));
        match self.fail {
            1 if attempt == 1 => return Err(JobError::retry("chaos: first attempt fails")),
            2 if attempt == 1 => return Err(JobError::fail("chaos: fails for good")),
            _ => {}
        }
        ctx.complete_in_transaction(|conn| {
            diesel::sql_query("INSERT INTO chaos_effects (job_id, attempt) VALUES ($1, $2)")
                .bind::<Uuid, _>(id)
                .bind::<diesel::sql_types::Integer, _>(attempt)
                .execute(conn)?;
            Ok(())
        })
    }
}

/// What one run does.
#[derive(Debug, Clone)]
pub struct ChaosOptions {
    /// The seed of the adversary's program.
    pub seed: u64,
    /// Operations the adversary performs.
    pub ops: usize,
    /// Runner processes at once.
    pub runners: usize,
    /// PostgreSQL restarts allowed (0: none).
    pub restarts: usize,
    /// The worker binary (`work` of a `jobqueue-cli` binary that registers
    /// [`ChaosJob`]).
    pub worker_bin: PathBuf,
    /// Longest wait for the runners to drain once the adversary stopped.
    pub drain: Duration,
    /// Plant one violation of each invariant in the log (and one job left
    /// behind) before the oracle reads it: the oracle's own test, which
    /// must then report every check.
    pub plant: bool,
}

impl ChaosOptions {
    /// A run of `seed` with `ops` operations, 3 runners of `worker_bin`,
    /// no PostgreSQL restart, a drain of at most 90 s.
    pub fn new(seed: u64, ops: usize, worker_bin: impl Into<PathBuf>) -> Self {
        ChaosOptions {
            seed,
            ops,
            runners: 3,
            restarts: 0,
            worker_bin: worker_bin.into(),
            drain: Duration::from_secs(90),
            plant: false,
        }
    }
}

/// One kind of invariant broken: its name, how often, some examples.
#[derive(Debug, Clone)]
pub struct Finding {
    /// The invariant.
    pub check: &'static str,
    /// Violations found.
    pub count: usize,
    /// The first few, described.
    pub examples: Vec<String>,
}

/// What one run did and found.
#[derive(Debug, Clone, Default)]
pub struct ChaosReport {
    /// The seed (replay with `JOBQUEUE_CHAOS_SEED`).
    pub seed: u64,
    /// Operations performed, by kind.
    pub ops: BTreeMap<&'static str, usize>,
    /// Operations the library refused as documented (a retry of a job
    /// that is not failed, a delete of a live one...).
    pub refused: usize,
    /// Jobs enqueued.
    pub jobs: i64,
    /// Claims logged.
    pub claims: i64,
    /// Rows of the database-written log.
    pub log_rows: i64,
    /// How close the run came to each limit, `name=value` (the busiest
    /// rate window, the most held in the limited queue, the most admitted
    /// of one key, the claims of workflow steps checked against their
    /// parents): evidence that the checks had something to check.
    pub peaks: Vec<String>,
    /// Broken invariants (empty: the run passed).
    pub findings: Vec<Finding>,
    /// What is worth knowing but is no invariant broken: operations that
    /// failed unexpectedly, violations excused by an operator's retry.
    pub notes: Vec<String>,
    /// Wall time of the run.
    pub secs: f64,
}

impl ChaosReport {
    /// Operations performed in all.
    pub fn total_ops(&self) -> usize {
        self.ops.values().sum()
    }

    /// A multi-line account: the seed, the operations, the findings.
    pub fn describe(&self) -> String {
        let ops: Vec<String> = self.ops.iter().map(|(k, v)| format!("{k}={v}")).collect();
        let mut text = format!(
            "chaos seed {}: {} ops ({}), {} refused; {} jobs, {} claims, {} log rows, {:.1} s; \
             {} findings",
            self.seed,
            self.total_ops(),
            ops.join(" "),
            self.refused,
            self.jobs,
            self.claims,
            self.log_rows,
            self.secs,
            self.findings.len()
        );
        if !self.peaks.is_empty() {
            text.push_str(&format!("\n  peaks: {}", self.peaks.join(" ")));
        }
        for finding in &self.findings {
            text.push_str(&format!("\n  FINDING {} x{}", finding.check, finding.count));
            for example in &finding.examples {
                text.push_str(&format!("\n    {example}"));
            }
        }
        for note in &self.notes {
            text.push_str(&format!("\n  note: {note}"));
        }
        if !self.findings.is_empty() {
            text.push_str(&format!(
                "\n  replay with JOBQUEUE_CHAOS_SEED={}",
                self.seed
            ));
        }
        text
    }
}

/// The seed `JOBQUEUE_CHAOS_SEED` names, if any (a malformed one is an
/// error, not ignored).
pub fn seed_from_env() -> Result<Option<u64>, ToolError> {
    match std::env::var("JOBQUEUE_CHAOS_SEED") {
        Ok(text) => text.trim().parse().map(Some).map_err(|_| {
            ToolError::Usage(format!("JOBQUEUE_CHAOS_SEED={text}: give a whole number"))
        }),
        Err(_) => Ok(None),
    }
}

/// The log, the effects and the adversary's records, with the triggers
/// that fill the log.
const SETUP: &str = "
CREATE TABLE chaos_log (
    n bigserial PRIMARY KEY,
    at timestamptz NOT NULL DEFAULT clock_timestamp(),
    job_id uuid NOT NULL,
    queue text, ckey text,
    old_status text, new_status text,
    claim_count int, claimed_at timestamptz, run_at timestamptz, old_lease timestamptz);
CREATE FUNCTION chaos_log_row() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'INSERT' THEN
        INSERT INTO chaos_log (job_id, queue, ckey, old_status, new_status, claim_count,
                               claimed_at, run_at)
        VALUES (NEW.id, NEW.queue, NEW.concurrency_key, NULL, NEW.status, NEW.claim_count,
                NEW.claimed_at, NEW.run_at);
        RETURN NEW;
    ELSIF TG_OP = 'UPDATE' THEN
        INSERT INTO chaos_log (job_id, queue, ckey, old_status, new_status, claim_count,
                               claimed_at, run_at, old_lease)
        VALUES (NEW.id, NEW.queue, NEW.concurrency_key, OLD.status, NEW.status,
                NEW.claim_count, NEW.claimed_at, NEW.run_at, OLD.lease_expires_at);
        RETURN NEW;
    END IF;
    INSERT INTO chaos_log (job_id, queue, ckey, old_status, new_status, claim_count,
                           claimed_at, run_at, old_lease)
    VALUES (OLD.id, OLD.queue, OLD.concurrency_key, OLD.status, NULL, OLD.claim_count,
            OLD.claimed_at, OLD.run_at, OLD.lease_expires_at);
    RETURN OLD;
END $$;
CREATE TRIGGER chaos_log_insert AFTER INSERT ON jobqueue_jobs
    FOR EACH ROW EXECUTE FUNCTION chaos_log_row();
CREATE TRIGGER chaos_log_update AFTER UPDATE ON jobqueue_jobs
    FOR EACH ROW WHEN (OLD.status IS DISTINCT FROM NEW.status
                       OR OLD.claim_count IS DISTINCT FROM NEW.claim_count)
    EXECUTE FUNCTION chaos_log_row();
CREATE TRIGGER chaos_log_delete AFTER DELETE ON jobqueue_jobs
    FOR EACH ROW EXECUTE FUNCTION chaos_log_row();

CREATE TABLE chaos_limits (
    n bigserial PRIMARY KEY,
    at timestamptz NOT NULL DEFAULT clock_timestamp(),
    queue text NOT NULL, paused bool, global_limit int, rate_starts int,
    rate_period interval, key_limit int);
CREATE FUNCTION chaos_limits_row() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'DELETE' THEN
        INSERT INTO chaos_limits (queue, paused) VALUES (OLD.name, false);
        RETURN OLD;
    END IF;
    INSERT INTO chaos_limits (queue, paused, global_limit, rate_starts, rate_period, key_limit)
    VALUES (NEW.name, NEW.paused, NEW.global_limit, NEW.rate_starts, NEW.rate_period,
            NEW.key_limit);
    RETURN NEW;
END $$;
CREATE TRIGGER chaos_limits_insert AFTER INSERT OR DELETE ON jobqueue_queues
    FOR EACH ROW EXECUTE FUNCTION chaos_limits_row();
CREATE TRIGGER chaos_limits_update AFTER UPDATE ON jobqueue_queues
    FOR EACH ROW WHEN ((OLD.paused, OLD.global_limit, OLD.rate_starts, OLD.rate_period,
                        OLD.key_limit, OLD.key_ordered)
                       IS DISTINCT FROM
                       (NEW.paused, NEW.global_limit, NEW.rate_starts, NEW.rate_period,
                        NEW.key_limit, NEW.key_ordered))
    EXECUTE FUNCTION chaos_limits_row();

CREATE TABLE chaos_effects (
    job_id uuid NOT NULL, attempt int NOT NULL,
    at timestamptz NOT NULL DEFAULT clock_timestamp());
CREATE TABLE chaos_starts (
    job_id uuid NOT NULL, attempt int NOT NULL, claimed_at timestamptz,
    at timestamptz NOT NULL DEFAULT clock_timestamp());
CREATE TABLE chaos_ops (
    n bigserial PRIMARY KEY,
    at timestamptz NOT NULL DEFAULT clock_timestamp(),
    op text NOT NULL, job_id uuid);
CREATE TABLE chaos_edges (parent uuid, child uuid, kind text, on_failure text);
CREATE TABLE chaos_batches (workflow uuid, on_success uuid, on_finish uuid, members uuid[]);
CREATE TABLE chaos_seq (job_id uuid, key text, seq bigint);
";

/// A runner process; SIGKILLed when dropped.
struct RunnerProc {
    name: String,
    child: Child,
    stderr: PathBuf,
}

impl RunnerProc {
    fn start(bin: &Path, url: &str, name: &str) -> Result<Self, ToolError> {
        let stderr = std::env::temp_dir().join(format!(
            "jobqueue-chaos-{}-{name}.stderr",
            std::process::id()
        ));
        let file = std::fs::File::create(&stderr)?;
        let child = Command::new(bin)
            .arg("--database-url")
            .arg(url)
            .arg("work")
            .arg("--worker-id")
            .arg(name)
            .args([
                "--concurrency",
                "4",
                "--lease-secs",
                "2",
                "--rescue-secs",
                "0.5",
                "--poll-interval-ms",
                "250",
                "--retry-base-ms",
                "100",
                "--retry-max-secs",
                "1",
                "--grace-secs",
                "5",
            ])
            .env("RUST_LOG", "warn")
            .env("JOBQUEUE_RETAIN_COMPLETED_HOURS", "24")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(file)
            .spawn()?;
        Ok(RunnerProc {
            name: name.to_owned(),
            child,
            stderr,
        })
    }

    /// Its exit status, if it exited by itself.
    fn exited(&mut self) -> Option<std::process::ExitStatus> {
        self.child.try_wait().ok().flatten()
    }

    /// The last lines of its stderr.
    fn tail(&self) -> String {
        let text = std::fs::read_to_string(&self.stderr).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        lines[lines.len().saturating_sub(5)..].join(" | ")
    }
}

impl Drop for RunnerProc {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_file(&self.stderr);
    }
}

#[derive(QueryableByName)]
struct Num {
    #[diesel(sql_type = BigInt)]
    n: i64,
}

#[derive(QueryableByName)]
struct Line {
    #[diesel(sql_type = Text)]
    line: String,
    #[diesel(sql_type = Bool)]
    excused: bool,
}

#[derive(QueryableByName)]
struct IdRow {
    #[diesel(sql_type = Uuid)]
    id: JobId,
}

fn sql_err(e: diesel::result::Error) -> ToolError {
    ToolError::Queue(QueueError::from(e))
}

fn count(conn: &mut PgConnection, query: &str) -> Result<i64, ToolError> {
    Ok(diesel::sql_query(query)
        .get_result::<Num>(conn)
        .map_err(sql_err)?
        .n)
}

/// The adversary: its program's random numbers, its connection, what it did.
struct Adversary<'a> {
    rng: fastrand::Rng,
    url: String,
    conn: PgConnection,
    options: &'a ChaosOptions,
    cluster: &'a ThrowawayCluster,
    runners: Vec<RunnerProc>,
    started: usize,
    seq: u64,
    restarts: usize,
    report: ChaosReport,
}

/// What an operation came to.
enum Outcome {
    Done,
    Refused,
}

impl Adversary<'_> {
    fn start_runner(&mut self) -> Result<(), ToolError> {
        self.started += 1;
        let name = format!("chaos-{}", self.started);
        let runner = RunnerProc::start(&self.options.worker_bin, &self.url, &name)?;
        self.runners.push(runner);
        Ok(())
    }

    fn job(&mut self) -> ChaosJob {
        self.seq += 1;
        let roll = self.rng.u8(..100);
        ChaosJob {
            seq: self.seq,
            ms: self.rng.u64(2..60),
            fail: match roll {
                0..=9 => 1,
                10..=14 => 2,
                _ => 0,
            },
        }
    }

    fn new_job(&mut self, options: JobOptions) -> Result<NewJob, ToolError> {
        let job = self.job();
        Ok(NewJob::from_job(&job, options)?)
    }

    /// Options of a job in a random queue of those a workflow step may use
    /// (not the ordered one: a blocked step's place in its key's line is
    /// not what ordering promises).
    fn step_options(&mut self) -> JobOptions {
        let queue = ["plain", "rated", "limited", "keyed", "default"][self.rng.usize(..5)];
        let options = JobOptions::new().queue(queue);
        if queue == "keyed" {
            options.concurrency_key(format!("k{}", self.rng.usize(..KEYS)))
        } else {
            options
        }
    }

    fn record_op(&mut self, op: &str, id: Option<JobId>) -> Result<(), ToolError> {
        diesel::sql_query("INSERT INTO chaos_ops (op, job_id) VALUES ($1, $2)")
            .bind::<Text, _>(op)
            .bind::<diesel::sql_types::Nullable<Uuid>, _>(id)
            .execute(&mut self.conn)
            .map_err(sql_err)?;
        Ok(())
    }

    /// Up to 200 ids of jobs matching `condition`, one picked at random.
    fn pick(&mut self, condition: &str) -> Result<Option<JobId>, ToolError> {
        let ids = diesel::sql_query(format!(
            "SELECT id FROM jobqueue_jobs WHERE {condition} ORDER BY id LIMIT 200"
        ))
        .load::<IdRow>(&mut self.conn)
        .map_err(sql_err)?;
        if ids.is_empty() {
            return Ok(None);
        }
        Ok(Some(ids[self.rng.usize(..ids.len())].id))
    }

    fn workflow(&mut self) -> Result<Outcome, ToolError> {
        let mut flow = Workflow::new(format!("chaos {}", self.seq))?;
        let run = self.rng.bool();
        if run {
            flow.on_failure(OnFailure::Run);
        }
        let n = self.rng.usize(2..7);
        let mut steps = Vec::new();
        let mut edges = Vec::new();
        for i in 0..n {
            let options = self.step_options();
            let job = self.new_job(options)?;
            let step = flow.add_job(format!("s{i}"), job)?;
            for &parent in &steps {
                if self.rng.u8(..100) < 45 {
                    let finished = self.rng.u8(..100) < 20;
                    if finished {
                        flow.after_finished(step, [parent])?;
                    } else {
                        flow.after(step, [parent])?;
                    }
                    edges.push((parent, step, finished));
                }
            }
            steps.push(step);
        }
        flow.enqueue(&mut self.conn)?;
        for (parent, child, finished) in edges {
            diesel::sql_query("INSERT INTO chaos_edges VALUES ($1, $2, $3, $4)")
                .bind::<Uuid, _>(parent.id())
                .bind::<Uuid, _>(child.id())
                .bind::<Text, _>(if finished { "finished" } else { "completed" })
                .bind::<Text, _>(if run { "run" } else { "cancel" })
                .execute(&mut self.conn)
                .map_err(sql_err)?;
        }
        self.report.jobs += n as i64;
        Ok(Outcome::Done)
    }

    fn batch(&mut self) -> Result<Outcome, ToolError> {
        let mut batch = Batch::new(format!("chaos batch {}", self.seq))?;
        let n = self.rng.usize(2..7);
        let mut members = Vec::new();
        for _ in 0..n {
            let options = self.step_options();
            let job = self.new_job(options)?;
            members.push(batch.add_job(job)?.id());
        }
        let success = self.job();
        let finish = self.job();
        batch.on_success(&success)?;
        batch.on_finish(&finish)?;
        let enqueued = batch.enqueue(&mut self.conn)?;
        let step = |name: &str| {
            enqueued
                .steps
                .iter()
                .find(|(n, _)| n == name)
                .map(|(_, id)| *id)
        };
        let (Some(success), Some(finish)) = (
            step(jobqueue_core::ON_SUCCESS),
            step(jobqueue_core::ON_FINISH),
        ) else {
            return Err(ToolError::Usage("a batch without its callbacks".into()));
        };
        for &member in &members {
            for (child, kind) in [(success, "completed"), (finish, "finished")] {
                diesel::sql_query("INSERT INTO chaos_edges VALUES ($1, $2, $3, 'cancel')")
                    .bind::<Uuid, _>(member)
                    .bind::<Uuid, _>(child)
                    .bind::<Text, _>(kind)
                    .execute(&mut self.conn)
                    .map_err(sql_err)?;
            }
        }
        diesel::sql_query("INSERT INTO chaos_batches VALUES ($1, $2, $3, $4)")
            .bind::<Uuid, _>(enqueued.id)
            .bind::<Uuid, _>(success)
            .bind::<Uuid, _>(finish)
            .bind::<diesel::sql_types::Array<Uuid>, _>(&members)
            .execute(&mut self.conn)
            .map_err(sql_err)?;
        self.report.jobs += n as i64 + 2;
        Ok(Outcome::Done)
    }

    /// `n` (random, below `most`) jobs into `queue`, keyed as `key` says;
    /// the ids inserted, each with its key and sequence number (in order
    /// only while none was dropped for its unique key, as in `ordered`).
    fn jobs(
        &mut self,
        queue: &str,
        most: usize,
        key: impl Fn(&mut fastrand::Rng) -> Option<String>,
    ) -> Result<Vec<(JobId, Option<String>, u64)>, ToolError> {
        let n = self.rng.usize(1..most);
        let mut jobs = Vec::new();
        let mut meta = Vec::new();
        for _ in 0..n {
            let mut options = JobOptions::new().queue(queue);
            let k = key(&mut self.rng);
            if let Some(k) = &k {
                options = options.concurrency_key(k.clone());
            }
            // A quarter of the unordered ones hold one of a few unique
            // keys: some are dropped by the insert, some re-enqueued alone
            // once a holder finished (an ordered key's line is read by id,
            // so its jobs carry none).
            if queue != "ordered" && self.rng.u8(..100) < 25 {
                options = options.unique_key(format!("u{}", self.rng.usize(..8)));
            }
            let job = self.new_job(options)?;
            meta.push((k, self.seq));
            jobs.push(job);
        }
        let ids = jobqueue_core::enqueue_many(&mut self.conn, &jobs)?.inserted;
        self.report.jobs += ids.len() as i64;
        Ok(ids
            .into_iter()
            .zip(meta)
            .map(|(id, (k, seq))| (id, k, seq))
            .collect())
    }

    fn ordered(&mut self) -> Result<Outcome, ToolError> {
        let jobs = self.jobs("ordered", 5, |rng| {
            Some(format!("o{}", rng.usize(..ORDERED_KEYS)))
        })?;
        for (id, key, seq) in jobs {
            diesel::sql_query("INSERT INTO chaos_seq VALUES ($1, $2, $3)")
                .bind::<Uuid, _>(id)
                .bind::<Text, _>(key.unwrap_or_default())
                .bind::<BigInt, _>(seq as i64)
                .execute(&mut self.conn)
                .map_err(sql_err)?;
        }
        Ok(Outcome::Done)
    }

    fn delayed(&mut self) -> Result<Outcome, ToolError> {
        let options = self
            .step_options()
            .delay(Duration::from_millis(self.rng.u64(100..800)));
        let job = self.new_job(options)?;
        jobqueue_core::enqueue(&mut self.conn, &job)?;
        self.report.jobs += 1;
        Ok(Outcome::Done)
    }

    fn retry(&mut self) -> Result<Outcome, ToolError> {
        let Some(id) = self.pick("status IN ('failed', 'cancelled')")? else {
            return Ok(Outcome::Refused);
        };
        self.record_op("retry", Some(id))?;
        jobqueue_core::retry_job(&mut self.conn, id)?;
        Ok(Outcome::Done)
    }

    fn retry_failed(&mut self) -> Result<Outcome, ToolError> {
        let queue = QUEUES[self.rng.usize(..QUEUES.len())];
        let ids = jobqueue_core::retry_failed(&mut self.conn, Some(queue), None)?;
        for id in ids {
            self.record_op("retry_failed", Some(id))?;
        }
        Ok(Outcome::Done)
    }

    fn cancel(&mut self) -> Result<Outcome, ToolError> {
        let Some(id) = self.pick("status NOT IN ('completed', 'failed', 'cancelled')")? else {
            return Ok(Outcome::Refused);
        };
        self.record_op("cancel", Some(id))?;
        jobqueue_core::cancel(&mut self.conn, id)?;
        Ok(Outcome::Done)
    }

    fn delete(&mut self) -> Result<Outcome, ToolError> {
        let Some(id) = self.pick("status IN ('completed', 'failed', 'cancelled')")? else {
            return Ok(Outcome::Refused);
        };
        self.record_op("delete", Some(id))?;
        jobqueue_core::browse::delete_finished_job(&mut self.conn, id)?;
        Ok(Outcome::Done)
    }

    fn kill(&mut self) -> Result<Outcome, ToolError> {
        if !self.runners.is_empty() {
            let victim = self.rng.usize(..self.runners.len());
            // Dropping it SIGKILLs it.
            drop(self.runners.swap_remove(victim));
        }
        self.start_runner()?;
        Ok(Outcome::Done)
    }

    /// Restarts PostgreSQL (immediate stop), unless the run allows no more
    /// restarts (then the operation is refused: the program stays the
    /// same whatever the number allowed).
    fn restart_postgres(&mut self) -> Result<Outcome, ToolError> {
        if self.restarts >= self.options.restarts {
            return Ok(Outcome::Refused);
        }
        self.restarts += 1;
        let cluster = self.cluster.cluster();
        cluster.stop(StopMode::Immediate)?;
        cluster.start()?;
        cluster.wait_ready(Duration::from_secs(60))?;
        self.reconnect()?;
        Ok(Outcome::Done)
    }

    fn reconnect(&mut self) -> Result<(), ToolError> {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            match PgConnection::establish(&self.url) {
                Ok(conn) => {
                    self.conn = conn;
                    return Ok(());
                }
                Err(e) if Instant::now() >= deadline => {
                    return Err(ToolError::Usage(format!("cannot reconnect: {e}")));
                }
                Err(_) => std::thread::sleep(Duration::from_millis(200)),
            }
        }
    }

    /// One operation, drawn from the program.
    fn step(&mut self) -> Result<(&'static str, Outcome), ToolError> {
        let table: [(&'static str, u32); 18] = [
            ("workflow", 10),
            ("batch", 8),
            ("keyed", 12),
            ("ordered", 10),
            ("rated", 10),
            ("limited", 10),
            ("delayed", 5),
            ("retry", 6),
            ("retry_failed", 2),
            ("cancel", 8),
            ("delete", 4),
            ("pause", 3),
            ("resume", 5),
            ("rate_limit", 3),
            ("queue_limit", 3),
            ("key_limit", 3),
            ("kill", 3),
            ("pg_restart", 2),
        ];
        let total: u32 = table.iter().map(|(_, w)| w).sum();
        let mut roll = self.rng.u32(..total);
        let mut op = "workflow";
        for (name, weight) in table {
            if roll < weight {
                op = name;
                break;
            }
            roll -= weight;
        }
        let outcome = match op {
            "workflow" => self.workflow(),
            "batch" => self.batch(),
            "keyed" => self
                .jobs("keyed", 6, |rng| Some(format!("k{}", rng.usize(..KEYS))))
                .map(|_| Outcome::Done),
            "ordered" => self.ordered(),
            "rated" => self.jobs("rated", 6, |_| None).map(|_| Outcome::Done),
            "limited" => self.jobs("limited", 5, |_| None).map(|_| Outcome::Done),
            "delayed" => self.delayed(),
            "retry" => self.retry(),
            "retry_failed" => self.retry_failed(),
            "cancel" => self.cancel(),
            "delete" => self.delete(),
            "pause" => {
                let queue = QUEUES[self.rng.usize(..QUEUES.len())];
                jobqueue_core::pause_queue(&mut self.conn, queue)
                    .map(|_| Outcome::Done)
                    .map_err(ToolError::from)
            }
            "resume" => {
                let queue = QUEUES[self.rng.usize(..QUEUES.len())];
                jobqueue_core::resume_queue(&mut self.conn, queue)
                    .map(|_| Outcome::Done)
                    .map_err(ToolError::from)
            }
            "rate_limit" => {
                let starts = self.rng.u32(10..41);
                RateLimit::new(starts, Duration::from_secs(1))
                    .and_then(|limit| {
                        jobqueue_core::set_queue_rate_limit(&mut self.conn, "rated", Some(limit))
                    })
                    .map(|_| Outcome::Done)
                    .map_err(ToolError::from)
            }
            "queue_limit" => {
                let limit = self.rng.u32(1..5);
                jobqueue_core::GlobalLimit::new(limit)
                    .and_then(|limit| {
                        jobqueue_core::set_queue_limit(&mut self.conn, "limited", Some(limit))
                    })
                    .map(|_| Outcome::Done)
                    .map_err(ToolError::from)
            }
            "key_limit" => {
                let limit = self.rng.u32(1..4);
                KeyLimit::per_key(limit)
                    .and_then(|limit| {
                        jobqueue_core::set_queue_key_limit(&mut self.conn, "keyed", Some(limit))
                    })
                    .map(|_| Outcome::Done)
                    .map_err(ToolError::from)
            }
            "kill" => self.kill(),
            _ => self.restart_postgres(),
        }?;
        Ok((op, outcome))
    }

    /// Runs the program: `ops` operations, a few milliseconds apart.
    fn run(&mut self) -> Result<(), ToolError> {
        for _ in 0..self.options.ops {
            let result = self.step();
            match result {
                Ok((op, Outcome::Done)) => *self.report.ops.entry(op).or_default() += 1,
                Ok((_, Outcome::Refused)) => self.report.refused += 1,
                Err(ToolError::Queue(
                    QueueError::WrongStatus { .. }
                    | QueueError::NotFound(_)
                    | QueueError::UniqueConflict { .. }
                    | QueueError::UnknownQueue { .. },
                )) => self.report.refused += 1,
                Err(e) => {
                    let text = e.to_string();
                    self.report
                        .notes
                        .push(format!("an operation failed: {text}"));
                    // A broken connection (a restart, a kill of the
                    // backend): connect again and go on.
                    self.reconnect()?;
                }
            }
            std::thread::sleep(Duration::from_millis(self.rng.u64(2..30)));
        }
        Ok(())
    }
}

/// Sets up the queues: limits in force before the first job.
/// Every queue is paused first, which makes it known.
fn set_limits(conn: &mut PgConnection) -> Result<(), ToolError> {
    for queue in QUEUES {
        jobqueue_core::pause_queue(conn, queue)?;
    }
    jobqueue_core::set_queue_key_limit(conn, "keyed", Some(KeyLimit::per_key(2)?))?;
    jobqueue_core::set_queue_key_limit(conn, "ordered", Some(KeyLimit::ordered()))?;
    jobqueue_core::set_queue_rate_limit(
        conn,
        "rated",
        Some(RateLimit::new(20, Duration::from_secs(1))?),
    )?;
    jobqueue_core::set_queue_limit(conn, "limited", Some(jobqueue_core::GlobalLimit::new(2)?))?;
    for queue in QUEUES {
        jobqueue_core::resume_queue(conn, queue)?;
    }
    Ok(())
}

/// One run: a cluster of its own, the runners, the adversary, the drain,
/// the oracle.
pub fn run(options: &ChaosOptions) -> Result<ChaosReport, ToolError> {
    let began = Instant::now();
    let cluster = ThrowawayCluster::start("chaos", &[])?;
    let admin_url = cluster.url("postgres");
    let mut admin = PgConnection::establish(&admin_url)
        .map_err(|e| ToolError::Usage(format!("connect to the chaos cluster: {e}")))?;
    admin
        .batch_execute("CREATE DATABASE jq_chaos")
        .map_err(sql_err)?;
    drop(admin);
    let url = cluster.url("jq_chaos");
    let mut conn = PgConnection::establish(&url)
        .map_err(|e| ToolError::Usage(format!("connect to the chaos database: {e}")))?;
    jobqueue_core::run_migrations(&mut conn)?;
    conn.batch_execute(SETUP).map_err(sql_err)?;
    set_limits(&mut conn)?;

    let mut adversary = Adversary {
        rng: fastrand::Rng::with_seed(options.seed),
        url: url.clone(),
        conn,
        options,
        cluster: &cluster,
        runners: Vec::new(),
        started: 0,
        seq: 0,
        restarts: 0,
        report: ChaosReport {
            seed: options.seed,
            ..ChaosReport::default()
        },
    };
    for _ in 0..options.runners {
        adversary.start_runner()?;
    }
    adversary.run()?;

    // The drain: every queue resumed, limits loose enough to finish soon.
    let conn = &mut adversary.conn;
    for queue in QUEUES {
        match jobqueue_core::resume_queue(conn, queue) {
            // A queue nothing named yet is not paused either.
            Ok(_) | Err(QueueError::UnknownQueue { .. }) => {}
            Err(e) => return Err(e.into()),
        }
    }
    jobqueue_core::set_queue_rate_limit(
        conn,
        "rated",
        Some(RateLimit::new(100, Duration::from_secs(1))?),
    )?;
    jobqueue_core::set_queue_limit(conn, "limited", Some(jobqueue_core::GlobalLimit::new(4)?))?;
    let deadline = Instant::now() + options.drain;
    loop {
        // Jobs the known bug leaves blocked would hold the drain to its
        // end: they do not count.
        let live = count(
            conn,
            &format!(
                "SELECT count(*) AS n FROM jobqueue_jobs
                 WHERE status NOT IN ('completed', 'failed', 'cancelled')
                   AND id NOT IN ({KNOWN_STUCK})"
            ),
        )?;
        if live == 0 || Instant::now() >= deadline {
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let mut report = std::mem::take(&mut adversary.report);
    for runner in &mut adversary.runners {
        if let Some(status) = runner.exited() {
            report.findings.push(Finding {
                check: "runner exited by itself",
                count: 1,
                examples: vec![format!("{} {status}: {}", runner.name, runner.tail())],
            });
        }
    }
    // Stop the runners before reading the log: nothing changes under the oracle.
    adversary.runners.clear();
    if options.plant {
        plant(&mut adversary.conn)?;
    }
    oracle(&mut adversary.conn, &mut report)?;
    report.secs = began.elapsed().as_secs_f64();
    Ok(report)
}

/// Steps that wait for the retry of a step that ended uncompleted: an
/// operator retried the step after a parent it waits for (edge
/// `completed`, workflow on failure `cancel`) ended uncompleted, so it
/// waits for that parent's retry, as under on failure `wait` (the doctor's
/// `workflows` check warns of them; `tests/it/races.rs`,
/// `a_step_retried_before_its_cancelled_parent_waits_for_it_and_the_doctor_says_so`);
/// and the steps blocked behind such a step.
const KNOWN_STUCK: &str = "
    WITH RECURSIVE stuck(id) AS (
        SELECT j.id FROM jobqueue_jobs AS j
        WHERE j.status = 'blocked'
          AND j.id IN (SELECT job_id FROM chaos_ops WHERE op IN ('retry', 'retry_failed'))
          AND EXISTS (SELECT 1 FROM jobqueue_workflow_edges AS e
                      JOIN jobqueue_workflow_steps AS ps ON ps.job_id = e.parent_id
                      JOIN jobqueue_workflows AS w ON w.id = e.workflow_id
                      WHERE e.child_id = j.id AND NOT e.settled AND e.kind = 'completed'
                        AND w.on_failure = 'cancel' AND ps.state IN ('failed', 'cancelled'))
        UNION
        SELECT e.child_id FROM stuck
        JOIN jobqueue_workflow_edges AS e ON e.parent_id = stuck.id AND NOT e.settled
        JOIN jobqueue_jobs AS c ON c.id = e.child_id AND c.status = 'blocked')
    SELECT id FROM stuck";

/// The state intervals the checks read: each log row starts its job's
/// state (`deleted` for a delete), lasting until the job's next row.
const STATES: &str = "
CREATE TEMP TABLE st AS
SELECT l.n, l.job_id, l.queue, l.ckey, l.at AS since,
       coalesce(lead(l.at) OVER w, 'infinity') AS until,
       coalesce(l.new_status, 'deleted') AS status,
       l.old_status, l.claim_count,
       coalesce(lag(l.claim_count) OVER w, 0) AS prev_claims,
       l.claimed_at, l.run_at, l.old_lease
FROM chaos_log AS l WINDOW w AS (PARTITION BY l.job_id ORDER BY l.n);
CREATE INDEX ON st (queue, since);
CREATE INDEX ON st (job_id, since);
CREATE TEMP TABLE lims AS
SELECT queue, at AS since,
       coalesce(lead(at) OVER (PARTITION BY queue ORDER BY n), 'infinity') AS until,
       paused, global_limit, rate_starts, rate_period, key_limit
FROM chaos_limits;
CREATE TEMP TABLE known_stuck AS {KNOWN_STUCK};
CREATE TEMP TABLE retried AS
SELECT DISTINCT job_id FROM chaos_ops WHERE op IN ('retry', 'retry_failed');
ANALYZE st; ANALYZE lims; ANALYZE retried;
";

/// The checks: a name, and a query of one row per violation (`line`, and
/// `excused` for one an operator's retry explains).
fn checks() -> Vec<(&'static str, String)> {
    vec![
        (
            "workflow step claimed before its parent settled",
            "SELECT format('step %s claimed at %s while parent %s was %s (edge %s, on_failure %s)',
                           e.child, c.since, e.parent, coalesce(p.status, 'not there yet'),
                           e.kind, e.on_failure) AS line,
                    -- A parent retried after its child was released runs
                    -- again beside it: not what the child waits for.
                    (e.parent IN (SELECT job_id FROM retried)) AS excused
             FROM chaos_edges AS e
             JOIN st AS c ON c.job_id = e.child AND c.claim_count > c.prev_claims
             LEFT JOIN LATERAL (
                 SELECT CASE WHEN s.status = 'deleted' THEN s.old_status ELSE s.status END AS status
                 FROM st AS s WHERE s.job_id = e.parent AND s.since < c.since
                 ORDER BY s.since DESC, s.n DESC LIMIT 1) AS p ON true
             WHERE p.status IS NULL
                OR NOT (p.status = 'completed'
                        OR (p.status IN ('failed', 'cancelled')
                            AND (e.kind = 'finished' OR e.on_failure = 'run')))"
                .to_owned(),
        ),
        (
            "completion effect not written exactly once",
            "WITH fin AS (
                 SELECT DISTINCT ON (job_id) job_id,
                        CASE WHEN status = 'deleted' THEN old_status ELSE status END AS status
                 FROM st ORDER BY job_id, n DESC),
             eff AS (SELECT job_id, count(*) AS n, min(attempt) AS attempt
                     FROM chaos_effects GROUP BY job_id)
             SELECT format('job %s ended %s with %s effect rows', coalesce(fin.job_id, eff.job_id),
                           coalesce(fin.status, 'unlogged'), coalesce(eff.n, 0)) AS line,
                    false AS excused
             FROM fin FULL JOIN eff ON eff.job_id = fin.job_id
             WHERE coalesce(eff.n, 0)
                   <> CASE WHEN fin.status = 'completed' THEN 1 ELSE 0 END"
                .to_owned(),
        ),
        (
            "batch callback cancelled though it should run",
            "SELECT format('batch %s: %s cancelled, its members %s', b.workflow,
                           CASE WHEN s.job_id = b.on_finish THEN 'on_finish' ELSE 'on_success' END,
                           (SELECT string_agg(DISTINCT m.status, ',') FROM st AS m
                            WHERE m.job_id = ANY(b.members))) AS line,
                    false AS excused
             FROM chaos_batches AS b
             JOIN st AS s ON s.job_id IN (b.on_success, b.on_finish) AND s.status = 'cancelled'
             WHERE s.job_id NOT IN (SELECT job_id FROM chaos_ops WHERE op = 'cancel' AND job_id IS NOT NULL)
               AND (s.job_id = b.on_finish
                    OR NOT EXISTS (SELECT 1 FROM st AS m WHERE m.job_id = ANY(b.members)
                                   AND m.status IN ('failed', 'cancelled')))"
                .to_owned(),
        ),
        (
            "key over its limit at an admission",
            format!(
                "WITH adm AS (
                     SELECT * FROM st WHERE ckey IS NOT NULL
                       AND status IN ('scheduled', 'pending', 'unhandled', 'claimed', 'running'))
                 SELECT format('%s admitted (%s -> %s) at %s: %s jobs of key %s/%s admitted, limit %s',
                               a.job_id, coalesce(a.old_status, 'new'), a.status, a.since, c.n,
                               a.queue, a.ckey, m.lim) AS line,
                        false AS excused
                 FROM adm AS a
                 CROSS JOIN LATERAL (
                     SELECT count(*) AS n FROM adm AS b
                     WHERE b.queue = a.queue AND b.ckey = a.ckey
                       AND b.since <= a.since AND b.until > a.since) AS c
                 CROSS JOIN LATERAL (
                     SELECT max(key_limit) AS lim, bool_or(key_limit IS NULL) AS open,
                            count(*) AS rows
                     FROM lims AS l WHERE l.queue = a.queue AND l.since <= a.since
                       AND l.until >= a.since - interval '{GRACE}') AS m
                 WHERE coalesce(a.old_status, 'new')
                       NOT IN ('scheduled', 'pending', 'unhandled', 'claimed', 'running')
                   AND m.rows > 0 AND NOT m.open AND c.n > m.lim"
            ),
        ),
        (
            "ordered key out of order or overlapping",
            "WITH firstclaim AS (SELECT job_id, min(since) AS t FROM st
                                 WHERE claim_count > prev_claims GROUP BY job_id),
                  ended AS (SELECT job_id, min(since) AS t FROM st
                            WHERE status IN ('completed', 'failed', 'cancelled', 'deleted')
                            GROUP BY job_id)
             SELECT format('key %s: job %s (seq %s) first claimed at %s, before job %s (seq %s) ended (%s)',
                           a.key, b.job_id, b.seq, fb.t, a.job_id, a.seq,
                           coalesce(fa.t::text, 'never')) AS line,
                    (a.job_id IN (SELECT job_id FROM retried)
                     OR b.job_id IN (SELECT job_id FROM retried)) AS excused
             FROM chaos_seq AS a
             JOIN chaos_seq AS b ON b.key = a.key AND b.seq > a.seq
             JOIN firstclaim AS fb ON fb.job_id = b.job_id
             LEFT JOIN ended AS fa ON fa.job_id = a.job_id
             WHERE fa.t IS NULL OR fa.t > fb.t"
                .to_owned(),
        ),
        (
            "queue over its global limit at a claim",
            format!(
                "SELECT format('%s claimed in %s at %s with %s held, limit %s', c.job_id, c.queue,
                               c.since, h.n, m.lim) AS line,
                        false AS excused
                 FROM st AS c
                 CROSS JOIN LATERAL (
                     SELECT count(*) AS n FROM st AS h
                     WHERE h.queue = c.queue AND h.status IN ('claimed', 'running')
                       AND h.since <= c.since AND h.until > c.since) AS h
                 CROSS JOIN LATERAL (
                     SELECT max(global_limit) AS lim, bool_or(global_limit IS NULL) AS open,
                            count(*) AS rows
                     FROM lims AS l WHERE l.queue = c.queue AND l.since <= c.since
                       AND l.until >= c.since - interval '{GRACE}') AS m
                 WHERE c.claim_count > c.prev_claims AND c.queue = 'limited'
                   AND m.rows > 0 AND NOT m.open AND h.n > m.lim"
            ),
        ),
        (
            "more claims in a window than the rate allows",
            format!(
                "WITH claims AS (SELECT job_id, queue, claimed_at FROM st
                                 WHERE claim_count > prev_claims AND queue = 'rated')
                 SELECT format('%s claims in %s in the second up to %s, rate at most %s',
                               w.n, c.queue, c.claimed_at, m.lim) AS line,
                        false AS excused
                 FROM claims AS c
                 CROSS JOIN LATERAL (
                     SELECT count(*) AS n FROM claims AS o
                     WHERE o.claimed_at > c.claimed_at - interval '1 second'
                       AND o.claimed_at <= c.claimed_at) AS w
                 CROSS JOIN LATERAL (
                     SELECT max(rate_starts) AS lim, bool_or(rate_starts IS NULL) AS open,
                            count(*) AS rows
                     FROM lims AS l WHERE l.queue = c.queue AND l.since <= c.claimed_at
                       AND l.until >= c.claimed_at - interval '1 second' - interval '{GRACE}') AS m
                 WHERE m.rows > 0 AND NOT m.open AND w.n > m.lim"
            ),
        ),
        (
            "more handler starts in a window than the rate allows",
            format!(
                "SELECT format('%s handler starts in rated in the second up to %s, rate at most %s \
                                (%s of them over 25 ms after their claim, the latest %s after)',
                               w.n, c.at, m.lim, w.slow, w.slowest) AS line,
                        false AS excused
                 FROM chaos_starts AS c
                 CROSS JOIN LATERAL (
                     SELECT count(*) AS n,
                            bool_or(o.at - o.claimed_at > interval '1 second') AS late,
                            count(*) FILTER (WHERE o.at - o.claimed_at > interval '25 ms') AS slow,
                            max(o.at - o.claimed_at) AS slowest
                     FROM chaos_starts AS o
                     WHERE o.at > c.at - interval '1 second' AND o.at <= c.at) AS w
                 CROSS JOIN LATERAL (
                     SELECT max(rate_starts) AS lim, bool_or(rate_starts IS NULL) AS open,
                            count(*) AS rows
                     FROM lims AS l WHERE l.queue = 'rated' AND l.since <= c.at
                       AND l.until >= c.at - interval '1 second' - interval '{GRACE}') AS m
                 WHERE m.rows > 0 AND NOT m.open AND w.n > m.lim AND NOT coalesce(w.late, false)"
            ),
        ),
        (
            "job left live after the drain",
            "SELECT format('%s %s in %s key %s: %s', j.id, j.status, j.queue,
                           coalesce(j.concurrency_key, '-'),
                           CASE j.status
                             WHEN 'blocked' THEN format('parents_left %s, parents %s',
                                 (SELECT parents_left FROM jobqueue_workflow_steps s
                                  WHERE s.job_id = j.id),
                                 (SELECT string_agg(format('%s %s/%s (step %s, workflow %s, edge %s; log %s; ops %s)',
                                      e.parent_id, p.status, e.settled, ps.state, w.on_failure, e.kind,
                                      (SELECT string_agg(coalesce(l.old_status, 'new') || '>'
                                                         || coalesce(l.new_status, 'deleted')
                                                         || '@' || to_char(l.at, 'MI:SS.MS'), ' ' ORDER BY l.n)
                                       FROM chaos_log l WHERE l.job_id = e.parent_id),
                                      (SELECT string_agg(o.op || '@' || to_char(o.at, 'MI:SS.MS'), ' ' ORDER BY o.n)
                                       FROM chaos_ops o WHERE o.job_id = e.parent_id)), '; ')
                                  FROM jobqueue_workflow_edges e
                                  LEFT JOIN jobqueue_jobs p ON p.id = e.parent_id
                                  LEFT JOIN jobqueue_workflow_steps ps ON ps.job_id = e.parent_id
                                  LEFT JOIN jobqueue_workflows w ON w.id = e.workflow_id
                                  WHERE e.child_id = j.id AND NOT e.settled))
                             WHEN 'waiting' THEN format('key admitted %s',
                                 (SELECT count(*) FROM jobqueue_jobs k
                                  WHERE k.queue = j.queue AND k.concurrency_key = j.concurrency_key
                                    AND k.status IN ('scheduled', 'pending', 'unhandled',
                                                     'claimed', 'running')))
                             ELSE format('run_at %s, lease %s', j.run_at, j.lease_expires_at)
                           END
                           || format(' | its log %s; ops on it %s',
                                (SELECT string_agg(coalesce(l.old_status, 'new') || '>'
                                                   || coalesce(l.new_status, 'deleted')
                                                   || '@' || to_char(l.at, 'MI:SS.MS'), ' ' ORDER BY l.n)
                                 FROM chaos_log l WHERE l.job_id = j.id),
                                (SELECT string_agg(o.op || '@' || to_char(o.at, 'MI:SS.MS'), ' ' ORDER BY o.n)
                                 FROM chaos_ops o WHERE o.job_id = j.id))) AS line,
                    (j.id IN (SELECT id FROM pg_temp.known_stuck)) AS excused
             FROM jobqueue_jobs AS j
             WHERE j.status NOT IN ('completed', 'failed', 'cancelled')"
                .to_owned(),
        ),
        (
            "maintenance stalled (a promotion or a rescue late)",
            format!(
                "SELECT format('%s %s -> %s at %s, %s late', job_id, old_status, status, since,
                               since - CASE WHEN old_status = 'scheduled' THEN run_at
                                            ELSE old_lease END) AS line,
                        false AS excused
                 FROM st
                 WHERE (old_status = 'scheduled' AND status = 'pending'
                        AND since - run_at > interval '{MAINTENANCE_LATE}')
                    OR (old_status IN ('claimed', 'running')
                        AND status NOT IN ('claimed', 'running')
                        AND since - old_lease > interval '{MAINTENANCE_LATE}')"
            ),
        ),
    ]
}

/// The peaks of [`ChaosReport::peaks`]: a name, a query of one `n`.
const PEAKS: [(&str, &str); 6] = [
    (
        "rated_most_claims_in_1s",
        "WITH c AS (SELECT claimed_at FROM st WHERE claim_count > prev_claims AND queue = 'rated')
         SELECT coalesce(max((SELECT count(*) FROM c AS o
                              WHERE o.claimed_at > c.claimed_at - interval '1 second'
                                AND o.claimed_at <= c.claimed_at)), 0) AS n FROM c",
    ),
    (
        "rated_highest_limit",
        "SELECT coalesce(max(rate_starts), 0)::int8 AS n FROM lims WHERE queue = 'rated'",
    ),
    (
        "limited_most_held",
        "SELECT coalesce(max((SELECT count(*) FROM st AS h
                              WHERE h.queue = 'limited' AND h.status IN ('claimed', 'running')
                                AND h.since <= c.since AND h.until > c.since)), 0) AS n
         FROM st AS c WHERE c.queue = 'limited' AND c.claim_count > c.prev_claims",
    ),
    (
        "keyed_most_admitted",
        "WITH adm AS (SELECT * FROM st WHERE ckey IS NOT NULL AND queue = 'keyed'
                        AND status IN ('scheduled', 'pending', 'unhandled', 'claimed', 'running'))
         SELECT coalesce(max((SELECT count(*) FROM adm AS b
                              WHERE b.ckey = a.ckey AND b.since <= a.since
                                AND b.until > a.since)), 0) AS n FROM adm AS a",
    ),
    (
        "ordered_jobs_claimed",
        "SELECT count(DISTINCT s.job_id) AS n FROM chaos_seq AS q
         JOIN st AS s ON s.job_id = q.job_id AND s.claim_count > s.prev_claims",
    ),
    (
        "step_claims_checked",
        "SELECT count(*) AS n FROM chaos_edges AS e
         JOIN st AS c ON c.job_id = e.child AND c.claim_count > c.prev_claims",
    ),
];

/// One violation of each invariant, an hour and more after the run (so
/// that nothing real overlaps them), and a job left scheduled.
const PLANTED: &str = "
-- Six jobs held at once in `limited` (limit at most 4).
INSERT INTO chaos_log (at, job_id, queue, old_status, new_status, claim_count, claimed_at)
SELECT now() + interval '1 hour' + g * interval '1 ms', gen_random_uuid(), 'limited',
       'pending', 'claimed', 1, now() + interval '1 hour'
FROM generate_series(1, 6) AS g;
-- 150 claims in 150 ms in `rated` (at most 100 a second).
INSERT INTO chaos_log (at, job_id, queue, old_status, new_status, claim_count, claimed_at)
SELECT now() + interval '2 hours' + g * interval '1 ms', gen_random_uuid(), 'rated',
       'pending', 'claimed', 1, now() + interval '2 hours' + g * interval '1 ms'
FROM generate_series(1, 150) AS g;
-- 150 handler starts in 150 ms in `rated`, each just claimed.
INSERT INTO chaos_starts (job_id, attempt, claimed_at, at)
SELECT gen_random_uuid(), 1, now() + interval '2 hours 30 minutes' + g * interval '1 ms',
       now() + interval '2 hours 30 minutes' + g * interval '1 ms'
FROM generate_series(1, 150) AS g;
-- Five jobs of one key admitted at once in `keyed` (at most 3).
INSERT INTO chaos_log (at, job_id, queue, ckey, old_status, new_status, claim_count)
SELECT now() + interval '3 hours' + g * interval '1 ms', gen_random_uuid(), 'keyed', 'kx',
       NULL, 'pending', 0
FROM generate_series(1, 5) AS g;
-- An ordered key's second job claimed while its first never ended.
INSERT INTO chaos_seq VALUES ('00000000-0000-7000-8000-00000000000a', 'ox', 1000000000),
                             ('00000000-0000-7000-8000-00000000000b', 'ox', 1000000001);
INSERT INTO chaos_log (at, job_id, queue, ckey, old_status, new_status, claim_count, claimed_at)
VALUES (now() + interval '4 hours', '00000000-0000-7000-8000-00000000000b', 'ordered', 'ox',
        'pending', 'claimed', 1, now() + interval '4 hours');
-- An effect of a job that never completed.
INSERT INTO chaos_effects (job_id, attempt) VALUES ('00000000-0000-7000-8000-00000000000c', 1);
-- A step claimed before its parent existed.
INSERT INTO chaos_edges VALUES ('00000000-0000-7000-8000-00000000000d',
                                '00000000-0000-7000-8000-00000000000e', 'completed', 'cancel');
INSERT INTO chaos_log (at, job_id, queue, old_status, new_status, claim_count, claimed_at)
VALUES (now() + interval '5 hours', '00000000-0000-7000-8000-00000000000e', 'plain',
        'pending', 'claimed', 1, now() + interval '5 hours');
-- A batch whose on_finish was cancelled by no one.
INSERT INTO chaos_batches VALUES ('00000000-0000-7000-8000-00000000000f',
                                  '00000000-0000-7000-8000-000000000010',
                                  '00000000-0000-7000-8000-000000000011', '{}');
INSERT INTO chaos_log (at, job_id, queue, old_status, new_status, claim_count)
VALUES (now() + interval '6 hours', '00000000-0000-7000-8000-000000000011', 'default',
        'blocked', 'cancelled', 0);
-- A promotion a minute late.
INSERT INTO chaos_log (at, job_id, queue, old_status, new_status, claim_count, run_at)
VALUES (now() + interval '7 hours', gen_random_uuid(), 'plain', 'scheduled', 'pending', 0,
        now() + interval '7 hours' - interval '1 minute');
";

/// Plants [`PLANTED`], and a job due in an hour: left behind by the drain.
fn plant(conn: &mut PgConnection) -> Result<(), ToolError> {
    conn.batch_execute(PLANTED).map_err(sql_err)?;
    let job = NewJob::from_job(
        &ChaosJob {
            seq: 0,
            ms: 0,
            fail: 0,
        },
        JobOptions::new()
            .queue("plain")
            .delay(Duration::from_secs(3600)),
    )?;
    jobqueue_core::enqueue(conn, &job)?;
    Ok(())
}

/// The names of the checks the oracle runs, each of which a planted run
/// must report.
pub fn check_names() -> Vec<&'static str> {
    checks().into_iter().map(|(name, _)| name).collect()
}

/// Reads the log and fills in the findings.
fn oracle(conn: &mut PgConnection, report: &mut ChaosReport) -> Result<(), ToolError> {
    conn.batch_execute(&STATES.replace("{KNOWN_STUCK}", KNOWN_STUCK))
        .map_err(sql_err)?;
    report.log_rows = count(conn, "SELECT count(*) AS n FROM chaos_log")?;
    report.claims = count(
        conn,
        "SELECT count(*) AS n FROM st WHERE claim_count > prev_claims",
    )?;
    for (name, query) in PEAKS {
        let value = count(conn, query)?;
        report.peaks.push(format!("{name}={value}"));
    }
    for (check, query) in checks() {
        let lines = diesel::sql_query(format!("SELECT * FROM ({query}) AS v LIMIT 1000"))
            .load::<Line>(conn)
            .map_err(|e| ToolError::Usage(format!("the check `{check}` failed: {e}")))?;
        let (excused, broken): (Vec<Line>, Vec<Line>) = lines.into_iter().partition(|l| l.excused);
        if !excused.is_empty() {
            report.notes.push(format!(
                "{check}: {} after an operator's retry, e.g. {}",
                excused.len(),
                excused[0].line
            ));
        }
        if !broken.is_empty() {
            report.findings.push(Finding {
                check,
                count: broken.len(),
                examples: broken.into_iter().take(EXAMPLES).map(|l| l.line).collect(),
            });
        }
    }
    Ok(())
}

/// `jobqueue bench --only chaos`: `runs` runs of `ops` operations each,
/// the first with `JOBQUEUE_CHAOS_SEED` if set, the others with random
/// seeds; each run's account printed as it ends, then the totals as rows.
pub(crate) fn measure(runs: usize, ops: usize, restarts: usize) -> Result<Vec<Row>, ToolError> {
    let worker_bin = std::env::current_exe()?;
    let first = seed_from_env()?;
    let (mut total_ops, mut total_claims, mut findings, mut failed_seeds) = (0, 0, 0, Vec::new());
    for run_index in 0..runs.max(1) {
        let seed = match (run_index, first) {
            (0, Some(seed)) => seed,
            _ => fastrand::u64(..),
        };
        let mut options = ChaosOptions::new(seed, ops, &worker_bin);
        options.restarts = restarts;
        let report = run(&options)?;
        println!("{}", report.describe());
        total_ops += report.total_ops();
        total_claims += report.claims;
        findings += report.findings.len();
        if !report.findings.is_empty() {
            failed_seeds.push(seed.to_string());
        }
    }
    let note = if failed_seeds.is_empty() {
        "no invariant broken".to_owned()
    } else {
        format!("failing seeds: {}", failed_seeds.join(", "))
    };
    Ok(vec![
        Row::new("chaos: runs", "runs", vec![runs.max(1) as f64]),
        Row::new("chaos: adversary operations", "ops", vec![total_ops as f64]),
        Row::new("chaos: claims logged", "claims", vec![total_claims as f64]),
        Row::new("chaos: findings", "kinds", vec![findings as f64]).note(note),
    ])
}
