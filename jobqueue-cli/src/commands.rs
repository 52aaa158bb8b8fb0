//! What each subcommand does.

use std::time::Duration;

use diesel::PgConnection;
use jobqueue_core::browse::{JobQuery, browse_jobs};
use jobqueue_core::engine::{DEFAULT_CONNECT_TIMEOUT, connectable_url};
use jobqueue_core::{
    CancelOutcome, EnqueueOutcome, JobLookup, JobOptions, JobRow, JobStatus, NewJob, Retention,
};

use jobqueue_runner::{Registry, Runner, RunnerConfig};

use crate::CliError;
use crate::args::{
    Command, CronCommand, EnqueueArgs, ListArgs, PruneArgs, QueueCommand, RetryArgs, WorkArgs,
};
use crate::connect::{connect, parse_id};
use crate::json;
use crate::output::{json_document, json_line, outln};
use crate::terminal::shown;

type Result<T, E = CliError> = std::result::Result<T, E>;

/// What the application gave its command line.
pub(crate) struct App<'a> {
    /// The name its messages go under.
    pub(crate) name: &'a str,
    /// Its handlers.
    pub(crate) registry: Registry,
    /// The states `work` builds for them (`Cli::state_with`).
    pub(crate) deferred: Vec<crate::Deferred>,
}

/// Runs one operational command on the database at `url`.
pub(crate) fn run(url: &str, command: Command, app: App<'_>) -> Result<()> {
    // An empty URL is refused before anything starts, like a missing one.
    connectable_url(url, DEFAULT_CONNECT_TIMEOUT)?;
    match command {
        Command::Migrate => migrate(url, app.registry.declared_queues()),
        Command::Work(work_args) => work(url, work_args, app),
        Command::Enqueue(enqueue_args) => enqueue(url, enqueue_args, &app.registry),
        Command::List(list_args) => list(url, list_args),
        Command::Show { id, json } => show(url, &id, json),
        Command::Stats { history, json } => stats(url, history, json),
        Command::Retry(retry_args) => retry(url, retry_args),
        Command::Cancel { id } => cancel(url, &id),
        Command::Delete { id } => delete(url, &id),
        Command::Prune(prune_args) => prune(url, prune_args),
        Command::Queue(queue_command) => queue(url, queue_command),
        Command::Cron(cron_command) => cron(url, cron_command),
        Command::Workflow(workflow_command) => crate::workflow::run(url, workflow_command),
        Command::Runners { json } => runners(url, json),
        Command::Doctor(doctor_args) => crate::doctor::run(url, doctor_args),
        Command::Dashboard(dashboard_args) => crate::dashboard::run(url, dashboard_args, app.name),
        // Never here: `Cli::main_with` answers them without a database.
        Command::Completions { .. } | Command::Man { .. } => Ok(()),
    }
}

/// A duration from a number of seconds given on the command line.
fn secs(name: &str, value: f64) -> Result<Duration> {
    Duration::try_from_secs_f64(value).map_err(|_| {
        CliError::Usage(format!(
            "--{name} must be a non-negative number of seconds, not {value}"
        ))
    })
}

/// [`secs`] of a flag that may be absent.
fn optional_secs(name: &str, value: Option<f64>) -> Result<Option<Duration>> {
    value.map(|value| secs(name, value)).transpose()
}

fn hours(name: &str, value: f64) -> Result<Duration> {
    secs(name, value * 3600.0)
}

/// Migrates, then applies the queues the binary declares (as its runners
/// would at their start), so that jobs enqueued before the first runner
/// starts already meet them.
fn migrate(url: &str, queues: &[jobqueue_core::QueueConfig]) -> Result<()> {
    let mut conn = connect(url)?;
    let applied = jobqueue_core::run_migrations(&mut conn)?;
    if applied.is_empty() {
        outln!("schema is up to date")?;
    } else {
        outln!(
            "applied {} migration(s): {}",
            applied.len(),
            applied.join(", ")
        )?;
    }
    if !queues.is_empty() {
        let declared = jobqueue_core::declare_queues(&mut conn, queues)?;
        if declared.is_empty() {
            outln!("queues as declared: {} unchanged", queues.len())?;
        } else {
            outln!("queues as declared: applied {}", declared.join(", "))?;
        }
    }
    Ok(())
}

fn work(url: &str, args: WorkArgs, app: App<'_>) -> Result<()> {
    let App {
        name,
        mut registry,
        deferred,
    } = app;
    let mut config = RunnerConfig::new(url)
        .concurrency(args.concurrency)
        .lease(secs("lease-secs", args.lease_secs)?);
    let (queues, queue_concurrency) = parse_queues(&args.queues)?;
    config.queues = queues;
    config.queue_concurrency = queue_concurrency;
    config.max_snoozes = args.max_snoozes;
    config.batch_size = args.batch_size;
    config.poll_interval = Duration::from_millis(args.poll_interval_ms);
    config.shutdown_grace = secs("grace-secs", args.grace_secs)?;
    config.rescue_interval = secs("rescue-secs", args.rescue_secs)?;
    config.index_upkeep_interval = secs("index-upkeep-secs", args.index_upkeep_secs)?;
    config.retry = jobqueue_core::RetryPolicy {
        base: Duration::from_millis(args.retry_base_ms),
        max: secs("retry-max-secs", args.retry_max_secs)?,
        ..jobqueue_core::RetryPolicy::default()
    };
    config.retention.completed = Some(hours(
        "retain-completed-hours",
        args.retain_completed_hours,
    )?);
    config.retention.failed = Some(hours("retain-failed-hours", args.retain_failed_hours)?);
    config.retention.cancelled = Some(hours(
        "retain-cancelled-hours",
        args.retain_cancelled_hours,
    )?);
    config.retention.workflows = Some(hours(
        "retain-workflows-hours",
        args.retain_workflows_hours,
    )?);
    if let Some(worker_id) = args.worker_id {
        config.worker_id = worker_id;
    }
    if let Some(addr) = args.metrics_addr {
        config.metrics = jobqueue_runner::MetricsMode::Serve(addr);
    }
    config.metrics_refresh = secs("metrics-refresh-secs", args.metrics_refresh_secs)?;
    config.db_timeout = secs("db-timeout-secs", args.db_timeout_secs)?;
    config.prefetch = args.prefetch;
    config.heartbeat_interval = optional_secs("heartbeat-secs", args.heartbeat_secs)?;
    config.prune_interval = secs("prune-secs", args.prune_secs)?;
    config.vacuum_interval = secs("vacuum-secs", args.vacuum_secs)?;
    config.vacuum_min_dead = args.vacuum_min_dead;
    config.default_timeout = optional_secs("default-timeout-secs", args.default_timeout_secs)?;
    config.completion_batch = args.completion_batch;
    config.handler_pool_size = args.handler_pool_size;
    #[cfg(feature = "async")]
    {
        config.threads = args.threads;
        config.async_threads = args.async_threads;
    }
    if registry.job_types().is_empty() {
        return Err(CliError::Usage(
            "this binary registers no job types, so `work` would never run anything: \
             build a worker binary of the application with \
             `jobqueue::Cli::new().register::<YourJob>().main()`"
                .into(),
        ));
    }
    let (types, queues, workers) = (
        registry.job_types().join(", "),
        if config.queues.is_empty() {
            "every queue".to_owned()
        } else {
            format!("queues {}", config.queues.join(", "))
        },
        config.concurrency,
    );
    // The application's state after every check of the flags, before
    // anything starts: a refused flag never built it.
    config.validate()?;
    for build in deferred {
        registry = build(url, registry)?;
    }
    // The handlers first: a signal from now on is caught and waits for the
    // thread below, even one sent as soon as the start line is out (before
    // them, it ended the process at once, without a graceful stop).
    let mut signals = signal_hook::iterator::Signals::new([
        signal_hook::consts::SIGINT,
        signal_hook::consts::SIGTERM,
    ])
    .map_err(CliError::Signals)?;
    let handle = Runner::new(config, registry).start()?;
    let trigger = handle.trigger();
    eprintln!("{name}: working {queues} with {workers} workers; job types: {types}");
    let signalled = name.to_owned();
    std::thread::Builder::new()
        .name("jobqueue-signals".into())
        .spawn(move || {
            let mut seen = 0;
            for signal in signals.forever() {
                seen += 1;
                if seen == 1 {
                    log::info!(
                        "signal {signal}: shutting down gracefully (send again to exit at once)"
                    );
                    trigger.request_shutdown();
                } else {
                    eprintln!(
                        "{signalled}: second signal: exiting now; leases of running jobs will expire"
                    );
                    std::process::exit(130);
                }
            }
        })
        .map_err(CliError::Signals)?;
    let summary = handle.wait();
    if summary.abandoned > 0 {
        eprintln!(
            "{name}: {} handlers were still running at exit; their jobs will be recovered when their leases expire",
            summary.abandoned
        );
    }
    if !summary.panicked_threads.is_empty() {
        return Err(CliError::RunnerPanicked(summary.panicked_threads));
    }
    Ok(())
}

/// `--queues` entries: `name` or `name=N` (this runner's concurrency for
/// the queue).
fn parse_queues(
    entries: &[String],
) -> Result<(Vec<String>, std::collections::BTreeMap<String, usize>)> {
    let mut queues = Vec::new();
    let mut concurrency = std::collections::BTreeMap::new();
    for entry in entries {
        let (name, most) = match entry.split_once('=') {
            None => (entry.as_str(), None),
            Some((name, n)) => match n.trim().parse::<usize>() {
                Ok(n) => (name, Some(n)),
                Err(_) => {
                    return Err(CliError::Usage(format!(
                        "--queues `{entry}`: after `=` comes this runner's most jobs of the \
                         queue at once, a whole number of at least 1 (e.g. mail=4)"
                    )));
                }
            },
        };
        let name = name.trim().to_owned();
        if queues.contains(&name) {
            return Err(CliError::Usage(format!("--queues names `{name}` twice")));
        }
        if let Some(most) = most {
            concurrency.insert(name.clone(), most);
        }
        queues.push(name);
    }
    Ok((queues, concurrency))
}

fn enqueue(url: &str, args: EnqueueArgs, registry: &Registry) -> Result<()> {
    let mut options = JobOptions::new();
    if let Some(priority) = args.priority {
        options = options.priority(priority);
    }
    if let Some(queue) = args.queue {
        options = options.queue(queue);
    }
    if let Some(max_attempts) = args.max_attempts {
        options = options.max_attempts(max_attempts);
    }
    if let Some(key) = args.unique_key {
        options = options.unique_key(key);
    }
    if let Some(key) = args.concurrency_key {
        options = options.concurrency_key(key);
    }
    options = options.tags(args.tags);
    for entry in &args.meta {
        let (key, value) = meta_entry(entry)?;
        options = options.meta(key, value);
    }
    if let Some(run_at) = args.run_at {
        options = options.run_at(parse_time("run-at", &run_at)?);
    }
    if let Some(delay) = args.delay_secs {
        options = options.delay(secs("delay-secs", delay)?);
    }
    let payload = match (args.payload, args.payload_file) {
        (Some(payload), _) => payload,
        (None, Some(path)) => read_payload(&path)?,
        (None, None) => {
            return Err(CliError::Usage(
                "no payload: give it as an argument or with --payload-file".into(),
            ));
        }
    };
    let registered = registry.job_types().contains(&args.job_type.as_str());
    let job = if registered {
        registry.new_job(&args.job_type, &payload, options)?
    } else if args.force {
        NewJob::new(&args.job_type, &payload, options)?
    } else {
        return Err(CliError::Usage(format!(
            "`{}` is not a job type this binary registers ({}); check the name, or pass \
             --force to enqueue it for another worker binary",
            args.job_type,
            match registry.job_types() {
                types if types.is_empty() => "it registers none".to_owned(),
                types => format!("it registers {}", types.join(", ")),
            }
        )));
    };
    match jobqueue_core::enqueue(&mut connect(url)?, &job)? {
        EnqueueOutcome::Duplicate(duplicate) => {
            eprintln!(
                "not enqueued: live job {} already holds unique key `{}`",
                duplicate.existing, duplicate.unique_key
            );
            outln!("{}", duplicate.existing)?;
        }
        inserted => outln!("{}", inserted.id())?,
    }
    Ok(())
}

/// The most `--payload-file` reads: far above any payload a job type
/// accepts by default (1 MiB serialized), low enough that a wrong file
/// (`/dev/zero`, a disk image) is refused before it fills the memory.
const MAX_PAYLOAD_FILE_BYTES: u64 = 64 * 1024 * 1024;

/// The payload from a file, or from standard input for `-`, read up to
/// [`MAX_PAYLOAD_FILE_BYTES`].
fn read_payload(path: &std::path::Path) -> Result<String> {
    use std::io::Read;
    let unreadable = |e: &dyn std::fmt::Display| {
        CliError::Usage(format!(
            "--payload-file {}: cannot read the payload: {e}",
            path.display()
        ))
    };
    let source: Box<dyn Read> = if path.as_os_str() == "-" {
        Box::new(std::io::stdin())
    } else {
        Box::new(std::fs::File::open(path).map_err(|e| unreadable(&e))?)
    };
    let mut bytes = Vec::new();
    source
        .take(MAX_PAYLOAD_FILE_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| unreadable(&e))?;
    if bytes.len() as u64 > MAX_PAYLOAD_FILE_BYTES {
        return Err(CliError::Usage(format!(
            "--payload-file {}: the payload is larger than {} MiB; give a JSON file of the \
             job's payload",
            path.display(),
            MAX_PAYLOAD_FILE_BYTES / (1024 * 1024)
        )));
    }
    String::from_utf8(bytes).map_err(|e| unreadable(&e))
}

/// An RFC 3339 time given as `--{name}`; a time without a zone is refused
/// with what to add, never taken as UTC or local time silently.
fn parse_time(name: &str, text: &str) -> Result<chrono::DateTime<chrono::Utc>> {
    if let Ok(at) = chrono::DateTime::parse_from_rfc3339(text) {
        return Ok(at.with_timezone(&chrono::Utc));
    }
    let zoneless = ["%Y-%m-%dT%H:%M:%S%.f", "%Y-%m-%d %H:%M:%S%.f"]
        .iter()
        .any(|format| chrono::NaiveDateTime::parse_from_str(text, format).is_ok());
    Err(CliError::Usage(if zoneless {
        format!("--{name} `{text}` has no time zone: add one, e.g. {text}Z or {text}+01:00")
    } else {
        format!("--{name} `{text}` is not an RFC 3339 time (e.g. 2026-11-22T10:00:00Z)")
    }))
}

/// Most jobs `list` prints.
const LIST_MOST: i64 = 10_000;

/// Most jobs one page of `list` reads.
const LIST_PAGE: i64 = 500;

/// Up to `limit` jobs matching `query`, newest first, page after page:
/// past the end of a search window too, so the whole history is searched
/// until `limit` are found (the cost an operator asks for with `list`).
fn newest_jobs(conn: &mut PgConnection, mut query: JobQuery, limit: i64) -> Result<Vec<JobRow>> {
    let mut jobs = Vec::new();
    loop {
        let left = limit - jobs.len() as i64;
        let page = browse_jobs(conn, &query, left.min(LIST_PAGE))?;
        jobs.extend(page.jobs);
        match page.next.or(page.searched_to) {
            Some(cursor) if (jobs.len() as i64) < limit => query.cursor = Some(cursor),
            _ => return Ok(jobs),
        }
    }
}

/// A `--meta KEY=VALUE` entry: VALUE as JSON when it parses, else as a
/// string.
fn meta_entry(entry: &str) -> Result<(&str, serde_json::Value)> {
    match entry.split_once('=') {
        Some((key, value)) if !key.is_empty() => Ok((
            key,
            serde_json::from_str(value)
                .unwrap_or_else(|_| serde_json::Value::String(value.to_owned())),
        )),
        _ => Err(CliError::Usage(format!(
            "invalid --meta {entry:?}: write it KEY=VALUE (`user=42`, `source=\"import\"`)"
        ))),
    }
}

fn list(url: &str, args: ListArgs) -> Result<()> {
    if !(1..=LIST_MOST).contains(&args.limit) {
        return Err(CliError::Usage(format!(
            "invalid --limit: {} is out of range (1 to {LIST_MOST})",
            args.limit
        )));
    }
    let query = JobQuery {
        status: args
            .status
            .as_deref()
            .map(str::parse::<JobStatus>)
            .transpose()?,
        queue: args.queue,
        job_type: args.job_type,
        tag: args.tag,
        ..JobQuery::default()
    };
    let jobs = newest_jobs(&mut connect(url)?, query, args.limit)?;
    if args.json {
        for job in &jobs {
            json_line(&json::JobSummary::of(job))?;
        }
        return Ok(());
    }
    outln!(
        "{:<36}  {:<20} {:<12} {:<9} {:>4} {:>7}  {:<20}  last error",
        "id",
        "type",
        "queue",
        "status",
        "prio",
        "tries",
        "run at"
    )?;
    for job in jobs {
        let error = match (&job.last_error, job.status) {
            (None, _) => String::new(),
            (Some(_), JobStatus::Completed) => "(completed after a retry)".to_owned(),
            (Some(error), _) => error.replace('\n', " "),
        };
        let error: String = error.chars().take(60).collect();
        let error = shown(&error);
        outln!(
            "{:<36}  {:<20} {:<12} {:<9} {:>4} {:>7}  {:<20}  {}",
            job.id,
            shown(&job.job_type),
            shown(&job.queue),
            job.status,
            job.priority,
            format!("{}/{}", job.attempts, job.max_attempts),
            job.run_at.format("%Y-%m-%d %H:%M:%S"),
            error
        )?;
    }
    Ok(())
}

/// `show` of a job whose row is gone (it completed, and completed rows are
/// not kept) but whose result is kept for its enqueuer.
fn show_kept_result(
    id: jobqueue_core::JobId,
    result: &serde_json::Value,
    json: bool,
) -> Result<()> {
    if json {
        return json_document(&serde_json::json!({
            "id": id,
            "status": "completed",
            "row": null,
            "result": result,
        }));
    }
    outln!("id:            {id}")?;
    outln!("status:        completed (its row was deleted; its result is kept)")?;
    outln!("result:        {}", shown(&result.to_string()))?;
    Ok(())
}

fn show(url: &str, id: &str, json: bool) -> Result<()> {
    let id = parse_id(id)?;
    let mut conn = connect(url)?;
    let result = jobqueue_core::kept_result(&mut conn, id)?;
    let job = match jobqueue_core::get_job(&mut conn, id)? {
        JobLookup::Found(job) => job,
        // An id jobqueue never issued is a wrong argument; a job that is
        // gone is the database's state, unless its result is kept.
        JobLookup::NotFound(missing) if missing.never_issued() => {
            return Err(CliError::Usage(missing.to_string()));
        }
        JobLookup::NotFound(missing) => {
            let Some(result) = result else {
                return Err(CliError::Refused(missing.to_string()));
            };
            return show_kept_result(id, &result, json);
        }
    };
    if json {
        return json_document(&json::JobDetail::of(&job, result.as_ref()));
    }
    let time = |t: Option<chrono::DateTime<chrono::Utc>>| {
        t.map(|t| t.to_rfc3339()).unwrap_or_else(|| "-".into())
    };
    outln!("id:            {}", job.id)?;
    outln!("type:          {}", shown(&job.job_type))?;
    outln!("queue:         {}", shown(&job.queue))?;
    outln!("status:        {}", job.status)?;
    outln!("priority:      {}", job.priority)?;
    outln!("attempts:      {} of {}", job.attempts, job.max_attempts)?;
    outln!(
        "unique key:    {}",
        shown(job.unique_key.as_deref().unwrap_or("-"))
    )?;
    outln!(
        "key:           {}",
        shown(job.concurrency_key.as_deref().unwrap_or("-"))
    )?;
    let tags = job
        .tags
        .as_ref()
        .map_or_else(|| "-".to_owned(), |t| t.join(" "));
    outln!("tags:          {}", shown(&tags))?;
    if let Some(metadata) = &job.metadata {
        outln!("metadata:      {}", shown(&metadata.to_string()))?;
    }
    if let Some(steps) = &job.step_outputs {
        outln!("steps:         {}", shown(&steps.to_string()))?;
    }
    if let Some(cursor) = &job.step_cursor {
        outln!("cursor:        {}", shown(&cursor.to_string()))?;
    }
    if let Some(result) = &result {
        outln!("result:        {}", shown(&result.to_string()))?;
    }
    outln!("created at:    {}", job.created_at.to_rfc3339())?;
    outln!("run at:        {}", job.run_at.to_rfc3339())?;
    outln!("claimed at:    {}", time(job.claimed_at))?;
    outln!("started at:    {}", time(job.started_at))?;
    outln!("finished at:   {}", time(job.finished_at))?;
    outln!(
        "worker:        {}",
        shown(job.worker_id.as_deref().unwrap_or("-"))
    )?;
    outln!("lease expires: {}", time(job.lease_expires_at))?;
    outln!(
        "progress:      {}% {} ({} events)",
        job.progress,
        shown(job.current_stage.as_deref().unwrap_or("")),
        job.events_count
    )?;
    if job.cancel_requested {
        outln!("cancel:        requested")?;
    }
    outln!("last error:    {}", shown(&last_error(&job)))?;
    outln!(
        "traceparent:   {}",
        shown(job.traceparent.as_deref().unwrap_or("-"))
    )?;
    outln!("payload:       {}", job.payload)?;
    if let Some(errors) = job.errors.as_array().filter(|e| !e.is_empty()) {
        outln!("errors:")?;
        for error in errors {
            outln!(
                "  attempt {} at {}: {}",
                error["attempt"],
                error["at"].as_str().unwrap_or("?"),
                shown(error["error"].as_str().unwrap_or("?"))
            )?;
        }
    }
    Ok(())
}

/// The last error, said to be an earlier attempt's when the job went on to
/// complete.
fn last_error(job: &jobqueue_core::JobRow) -> String {
    match (&job.last_error, job.status) {
        (None, _) => "-".to_owned(),
        (Some(error), JobStatus::Completed) => format!(
            "{error} (an earlier attempt's: the job was retried and completed on attempt {})",
            job.attempts
        ),
        (Some(error), _) => error.clone(),
    }
}

use jobqueue_core::browse::human_duration as human;

fn stats(url: &str, history: bool, json: bool) -> Result<()> {
    let mut conn = connect(url)?;
    let counting = if history {
        jobqueue_core::Counting::WithHistory
    } else {
        jobqueue_core::Counting::Live
    };
    // Queues without jobs (named only by a setting, a schedule or a
    // runner) are `queue list`'s.
    let queues: Vec<_> = jobqueue_core::list_queues(&mut conn, counting)?
        .into_iter()
        .filter(|q| !q.counts.is_empty())
        .collect();
    let completed = json::Completed {
        last_hour: jobqueue_core::engine::completed_within(&mut conn, Duration::from_secs(3600))?,
        last_day: jobqueue_core::engine::completed_within(
            &mut conn,
            Duration::from_secs(24 * 3600),
        )?,
    };
    let types = jobqueue_core::type_stats(&mut conn)?;
    let runners: Vec<_> = if types.is_empty() {
        Vec::new()
    } else {
        jobqueue_core::list_runners(&mut conn)?
            .into_iter()
            .filter(|r| !r.is_gone())
            .collect()
    };
    let handled =
        |t: &jobqueue_core::TypeStats| runners.iter().any(|r| r.job_types.contains(&t.job_type));
    let live: Vec<JobStatus> = JobStatus::ALL
        .into_iter()
        .filter(|s| !s.is_finished())
        .collect();
    if json {
        return json_document(&json::Stats {
            history,
            queues: queues
                .iter()
                .map(|q| json::QueueCounts::of(q, history))
                .collect(),
            completed,
            types: types
                .iter()
                .map(|t| json::TypeCounts::of(t, &live, handled(t)))
                .collect(),
        });
    }
    let header = JobStatus::ALL.map(JobStatus::as_str);
    outln!(
        "{:<16} {}{:>12}",
        "queue",
        header.map(|h| format!("{h:>10}")).concat(),
        "oldest due"
    )?;
    for q in &queues {
        let age = q.oldest_due_age().map(human).unwrap_or_else(|| "-".into());
        let counts = JobStatus::ALL.map(|s| {
            if history || !matches!(s, JobStatus::Completed | JobStatus::Cancelled) {
                format!("{:>10}", q.count(s))
            } else {
                format!("{:>10}", "-")
            }
        });
        outln!("{:<16} {}{:>12}", shown(&q.queue), counts.concat(), age)?;
    }
    outln!(
        "\ncompleted: {} in the last hour, {} in the last day \
         (counted as they complete; their rows are kept only by runners \
         started with --retain-completed-hours)",
        completed.last_hour,
        completed.last_day
    )?;
    if !types.is_empty() {
        outln!(
            "\n{:<32} {}",
            "live jobs by type",
            live.iter()
                .map(|h| format!("{:>10}", h.as_str()))
                .collect::<String>()
        )?;
        for t in &types {
            let counts: String = live
                .iter()
                .map(|s| format!("{:>10}", t.counts.get(s).copied().unwrap_or(0)))
                .collect();
            outln!(
                "{:<32} {}{}",
                shown(&t.job_type),
                counts,
                if handled(t) {
                    ""
                } else {
                    "  (no live runner handles this type)"
                }
            )?;
        }
    }
    Ok(())
}

fn retry(url: &str, args: RetryArgs) -> Result<()> {
    let mut conn = connect(url)?;
    if args.failed {
        let ids = jobqueue_core::retry_failed(&mut conn, None, None)?;
        outln!("requeued {} failed job(s)", ids.len())?;
    } else if let Some(id) = args.id {
        let id = parse_id(&id)?;
        jobqueue_core::retry_job(&mut conn, id)?;
        outln!("requeued {id}")?;
    }
    Ok(())
}

fn cancel(url: &str, id: &str) -> Result<()> {
    let id = parse_id(id)?;
    match jobqueue_core::cancel(&mut connect(url)?, id)? {
        CancelOutcome::Cancelled => outln!("cancelled {id}")?,
        CancelOutcome::Requested => {
            outln!("cancel requested: {id} is running; its handler will be told")?
        }
        CancelOutcome::AlreadyFinished(JobStatus::Cancelled) => {
            outln!("{id} was already cancelled")?;
        }
        CancelOutcome::AlreadyFinished(status) => {
            return Err(CliError::Refused(format!(
                "job {id} already finished: {status}; only waiting or running jobs can be cancelled"
            )));
        }
        other => outln!("{id}: {other:?}")?,
    }
    Ok(())
}

fn delete(url: &str, id: &str) -> Result<()> {
    let id = parse_id(id)?;
    match jobqueue_core::browse::delete_finished_job(&mut connect(url)?, id) {
        Ok(()) => {
            outln!("deleted {id}")?;
            Ok(())
        }
        Err(jobqueue_core::Error::WrongStatus { status, .. }) => Err(CliError::Refused(format!(
            "job {id} is {status}: only finished jobs can be deleted (cancel it first)"
        ))),
        Err(e) => Err(e.into()),
    }
}

fn prune(url: &str, args: PruneArgs) -> Result<()> {
    let retention = Retention::default()
        .completed(Some(hours("completed-hours", args.completed_hours)?))
        .failed(Some(hours("failed-hours", args.failed_hours)?))
        .cancelled(Some(hours("cancelled-hours", args.cancelled_hours)?));
    let pruned = jobqueue_core::engine::prune(&mut connect(url)?, &retention)?;
    outln!(
        "pruned {} completed, {} failed, {} cancelled job(s) and {} finished workflow(s)",
        pruned.completed,
        pruned.failed,
        pruned.cancelled,
        pruned.workflows
    )?;
    Ok(())
}

fn queue(url: &str, command: QueueCommand) -> Result<()> {
    let mut conn = connect(url)?;
    match command {
        QueueCommand::List { json } => queue_list(&mut conn, json),
        QueueCommand::Pause { name } => {
            let change = jobqueue_core::pause_queue(&mut conn, &name)?;
            match (change.was_paused, change.known) {
                (true, _) => outln!("queue {name} was already paused")?,
                (false, true) => outln!(
                    "paused queue {name}: runners claim none of its jobs until `jobqueue queue resume {name}`"
                )?,
                (false, false) => outln!(
                    "paused queue {name}; no job names it yet (queues come into being when used): \
                     its jobs will wait from the first"
                )?,
            }
            Ok(())
        }
        QueueCommand::Resume { name } => {
            let change = jobqueue_core::resume_queue(&mut conn, &name)?;
            if change.was_paused {
                outln!("resumed queue {name}")?;
            } else {
                outln!("queue {name} was not paused")?;
            }
            Ok(())
        }
        QueueCommand::Limit(args) => {
            let limit = match (args.limit, args.none) {
                (_, true) => None,
                (Some(n), false) => Some(jobqueue_core::GlobalLimit::try_from(n)?),
                (None, false) => {
                    return Err(CliError::Usage("give a limit, or --none".into()));
                }
            };
            let change = jobqueue_core::set_queue_limit(&mut conn, &args.name, limit)?;
            let name = &args.name;
            match limit {
                Some(n) => outln!(
                    "queue {name}: at most {n} jobs held at once by all runners together{}",
                    not_named_yet(change)
                )?,
                None => outln!("queue {name}: no limit")?,
            }
            Ok(())
        }
        QueueCommand::Rate(args) => {
            let rate = if args.none { None } else { args.rate };
            let change = jobqueue_core::set_queue_rate_limit(&mut conn, &args.name, rate)?;
            let name = &args.name;
            match rate {
                Some(rate) => outln!(
                    "queue {name}: at most {} jobs started per {} by all runners together{}",
                    rate.starts(),
                    rate.period_text(),
                    not_named_yet(change)
                )?,
                None => outln!("queue {name}: no rate limit")?,
            }
            Ok(())
        }
        QueueCommand::Keys(args) => {
            let limit = if args.none { None } else { args.limit };
            let change = jobqueue_core::set_queue_key_limit(&mut conn, &args.name, limit)?;
            outln!(
                "{}{}",
                key_limit_notice(&args.name, limit),
                not_named_yet(change)
            )?;
            Ok(())
        }
    }
}

/// The note after a setting on a queue nothing names yet (a typo, or a
/// queue set up before its first jobs).
fn not_named_yet(change: jobqueue_core::QueueChange) -> &'static str {
    if change.known {
        ""
    } else {
        " (no job names it yet: the setting waits for its first jobs)"
    }
}

/// What setting `queue`'s key limit to `limit` did, in words.
fn key_limit_notice(queue: &str, limit: Option<jobqueue_core::KeyLimit>) -> String {
    match limit {
        Some(limit) if limit.is_ordered() => format!(
            "queue {queue}: one job of a key at a time, in enqueue order, by all runners together"
        ),
        Some(limit) => format!(
            "queue {queue}: at most {} jobs of one key at once by all runners together",
            limit.jobs_per_key()
        ),
        None => format!("queue {queue}: no key limit"),
    }
}

fn queue_list(conn: &mut PgConnection, json: bool) -> Result<()> {
    let queues = jobqueue_core::list_queues(conn, jobqueue_core::Counting::Live)?;
    if json {
        return json_document(&json::Queues {
            queues: queues.iter().map(json::QueueLine::of).collect(),
        });
    }
    if queues.is_empty() {
        outln!("no queues: no live or failed jobs, nothing paused or limited")?;
        return Ok(());
    }
    outln!(
        "{:<20} {:<8} {:>10} {:>10} {:>10} {:>10} {:>8} {:>10} {:>12} {:>8} {:>12} {:>8} {:>10} {:>22}",
        "queue",
        "state",
        "due",
        "blocked",
        "scheduled",
        "unhandled",
        "held",
        "failed",
        "oldest due",
        "limit",
        "rate",
        "started",
        "keys",
        "keyed"
    )?;
    let mut overridden = Vec::new();
    for q in queues {
        let state = match (q.paused, q.backoff_left()) {
            (true, _) => "paused",
            (false, Some(_)) => "backoff",
            (false, None) => "active",
        };
        outln!(
            "{:<20} {:<8} {:>10} {:>10} {:>10} {:>10} {:>8} {:>10} {:>12} {:>8} {:>12} {:>8} {:>10} {:>22}",
            shown(&q.queue),
            state,
            q.count(JobStatus::Pending),
            q.count(JobStatus::Blocked),
            q.count(JobStatus::Scheduled),
            q.count(JobStatus::Unhandled),
            q.held(),
            q.count(JobStatus::Failed),
            q.oldest_due_age().map(human).unwrap_or_else(|| "-".into()),
            q.global_limit
                .map(|n| n.to_string())
                .unwrap_or_else(|| "-".into()),
            q.rate_limit
                .map(|rate| rate.to_string())
                .unwrap_or_else(|| "-".into()),
            if q.rate_limit.is_some() {
                q.rate_used.to_string()
            } else {
                "-".into()
            },
            q.key_limit
                .map(|limit| limit.to_string())
                .unwrap_or_else(|| "-".into()),
            keyed(&q),
        )?;
        overridden.extend(q.overrides().into_iter().map(|o| (q.queue.clone(), o)));
    }
    // What operators changed of what the code declares: it stands until
    // the code declares another value.
    for (queue, o) in overridden {
        outln!(
            "{}: {} is {}, the code declares {} (set at run time; stands until the code declares another)",
            shown(&queue),
            o.setting,
            o.now,
            o.declared
        )?;
    }
    Ok(())
}

/// A queue's keyed jobs in `queue list`: `12 held, 340 waiting` (keys
/// held, jobs waiting on their key), `-` without a key limit or jobs
/// still waiting from one.
fn keyed(q: &jobqueue_core::QueueInfo) -> String {
    let waiting = q.count(JobStatus::Waiting);
    if q.key_limit.is_none() && waiting == 0 {
        return "-".into();
    }
    format!("{} held, {waiting} waiting", q.keys_held)
}

fn cron(url: &str, command: CronCommand) -> Result<()> {
    let mut conn = connect(url)?;
    match command {
        CronCommand::List { json } => cron_list(&mut conn, json),
        CronCommand::Pause { name } => {
            if jobqueue_core::set_schedule_paused(&mut conn, &name, true)? {
                outln!("schedule {name} was already paused")?;
            } else {
                outln!(
                    "paused schedule {name}: it fires nothing until `jobqueue cron resume {name}`"
                )?;
            }
            Ok(())
        }
        CronCommand::Resume { name } => {
            if jobqueue_core::set_schedule_paused(&mut conn, &name, false)? {
                outln!("resumed schedule {name}: it fires from its next slot")?;
            } else {
                outln!("schedule {name} was not paused")?;
            }
            Ok(())
        }
        CronCommand::Run { name } => {
            let id = jobqueue_core::run_schedule_now(&mut conn, &name)?;
            outln!("{id}")?;
            Ok(())
        }
    }
}

fn cron_list(conn: &mut PgConnection, json: bool) -> Result<()> {
    let schedules = jobqueue_core::list_schedules(conn)?;
    if json {
        return json_document(&json::Schedules {
            schedules: schedules.iter().map(json::Schedule::of).collect(),
        });
    }
    if schedules.is_empty() {
        outln!("no schedules: a worker binary declares its own when it starts")?;
        return Ok(());
    }
    let time =
        |t: chrono::DateTime<chrono::Utc>| t.to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
    outln!(
        "{:<24} {:<18} {:<16} {:<22} {:<22} state",
        "schedule",
        "cron",
        "time zone",
        "last slot",
        "next slot"
    )?;
    for s in schedules {
        let state = match json::schedule_state(&s) {
            "orphaned" => "orphaned (no runner declares it)",
            state => state,
        };
        outln!(
            "{:<24} {:<18} {:<16} {:<22} {:<22} {state}",
            shown(&s.name),
            shown(&s.cron),
            shown(json::schedule_zone(&s)),
            time(s.last_slot),
            s.next_slot().map(time).unwrap_or_else(|| "-".into()),
        )?;
    }
    Ok(())
}

fn runners(url: &str, json: bool) -> Result<()> {
    let runners = jobqueue_core::list_runners(&mut connect(url)?)?;
    if json {
        return json_document(&json::Runners {
            runners: runners.iter().map(json::Runner::of).collect(),
        });
    }
    if runners.is_empty() {
        outln!("no runners registered")?;
        return Ok(());
    }
    outln!(
        "{:<32} {:<16} {:>8} {:<8} {:>7} {:<20} {:>10} {:<5} job types",
        "runner",
        "host",
        "pid",
        "version",
        "workers",
        "queues",
        "last seen",
        "state"
    )?;
    for r in runners {
        outln!(
            "{:<32} {:<16} {:>8} {:<8} {:>7} {:<20} {:>10} {:<5} {}",
            shown(&r.worker_id),
            shown(&r.host),
            r.pid,
            r.version,
            r.concurrency,
            if r.queues.is_empty() {
                "all".to_owned()
            } else {
                shown(&r.queues.join(",")).into_owned()
            },
            format!("{} ago", human(r.silent_for())),
            json::runner_state(&r),
            shown(&r.job_types.join(",")),
        )?;
    }
    Ok(())
}
