//! The cost of the `tracing` feature: the enqueue latency and the drain
//! rate of a build without the feature (`--plain-bin`), of this build (the
//! feature in) with no subscriber, and of this build with a subscriber that
//! exports to memory. Each is a process of its own ([`super::trace_part`]),
//! run in turn within each run (the order rotated from one run to the
//! next) so that the three share the machine's noise.

use std::path::Path;
use std::process::{Command, Stdio};

use super::trace_part::{ENQUEUE_BLOCKS, PartReport, TraceVariant, drain_rate};
use super::{Row, Sizes};
use crate::ToolError;

/// Enqueue latency with the feature built in (no subscriber) over the
/// latency without it that is still fine.
const ENQUEUE_TARGET: f64 = 1.02;
/// Drain rate with the feature built in (no subscriber) over the rate
/// without it that is still fine.
const DRAIN_TARGET: f64 = 0.98;
/// Drain rate with a subscriber exporting to memory over the rate without
/// the feature that is still fine.
const MEMORY_TARGET: f64 = 0.85;

/// How to get a binary without the `tracing` feature, for the errors that
/// need one.
pub(crate) const PLAIN_BIN_HELP: &str = "build one without the feature (`cargo build --release -p \
     jobqueue-tools`, then copy target/release/jobqueue aside) and pass it as --plain-bin, or run \
     scripts/bench-trace, which builds both";

/// Where and how the runs are made.
pub(crate) struct TraceBench<'a> {
    /// The server the bench runs on (its admin URL).
    pub(crate) server_url: &'a str,
    /// The bench's database on it.
    pub(crate) database: &'a str,
    /// The binary built without the feature.
    pub(crate) plain_bin: &'a Path,
    /// Quick sizes.
    pub(crate) quick: bool,
}

/// The rows: each variant's enqueue latency and drain rate, over `runs`.
pub(crate) fn measure(
    bench: &TraceBench<'_>,
    sizes: &Sizes,
    runs: usize,
) -> Result<Vec<Row>, ToolError> {
    let this_bin = std::env::current_exe()?;
    let variants = [TraceVariant::Plain, TraceVariant::Off, TraceVariant::Memory];
    let (mut plain, mut off, mut memory) = (Vec::new(), Vec::new(), Vec::new());
    for run in 0..runs {
        for i in 0..variants.len() {
            let variant = variants[(run + i) % variants.len()];
            let bin = match variant {
                TraceVariant::Plain => bench.plain_bin,
                TraceVariant::Off | TraceVariant::Memory => &this_bin,
            };
            let report = part(bench, bin, variant)?;
            match variant {
                TraceVariant::Plain => plain.push(report),
                TraceVariant::Off => off.push(report),
                TraceVariant::Memory => memory.push(report),
            }
        }
    }
    let enqueue =
        |reports: &[PartReport]| -> Vec<f64> { reports.iter().map(|r| r.enqueue_us).collect() };
    let drain = |reports: &[PartReport]| -> Vec<f64> { reports.iter().map(drain_rate).collect() };
    let ratios =
        |a: &[f64], b: &[f64]| -> Vec<f64> { a.iter().zip(b).map(|(a, b)| a / b).collect() };
    let (plain_us, off_us, memory_us) = (enqueue(&plain), enqueue(&off), enqueue(&memory));
    let (plain_rate, off_rate, memory_rate) = (drain(&plain), drain(&off), drain(&memory));
    let exported: u64 = memory.iter().map(|r| r.attempt_spans).sum();
    let in_trace: u64 = memory.iter().map(|r| r.attempts_in_trace).sum();
    let drained: u64 = memory.iter().map(|r| r.jobs_drained).sum();
    let jobs = sizes.trace_drain_jobs;
    let drains = sizes.trace_drains;
    let enqueues = sizes.trace_enqueues;
    Ok(vec![
        Row::new(
            "enqueue latency, built without `tracing`",
            "µs",
            plain_us.clone(),
        )
        .note(format!(
            "one job per transaction, one connection; median of {ENQUEUE_BLOCKS} blocks' \
             means, {enqueues} enqueues a run"
        )),
        Row::new(
            "enqueue latency, `tracing` in, no subscriber",
            "µs",
            off_us.clone(),
        ),
        Row::new(
            "enqueue latency, no subscriber / without",
            "ratio",
            ratios(&off_us, &plain_us),
        )
        .note(format!("target ≤ {ENQUEUE_TARGET}")),
        Row::new(
            "enqueue latency, subscriber exporting to memory",
            "µs",
            memory_us,
        )
        .note("each in a `request` span; no target"),
        Row::new(
            format!("drain, {jobs} jobs, built without `tracing`"),
            "jobs/s",
            plain_rate.clone(),
        )
        .note(format!(
            "median of {drains} drains per run, 8 workers, as the drain rows"
        )),
        Row::new(
            format!("drain, {jobs} jobs, `tracing` in, no subscriber"),
            "jobs/s",
            off_rate.clone(),
        ),
        Row::new(
            "drain rate, no subscriber / without",
            "ratio",
            ratios(&off_rate, &plain_rate),
        )
        .note(format!("target ≥ {DRAIN_TARGET}")),
        Row::new(
            format!("drain, {jobs} jobs, subscriber exporting to memory"),
            "jobs/s",
            memory_rate.clone(),
        )
        .note("every job with a traceparent; to the last span exported"),
        Row::new(
            "drain rate, subscriber exporting to memory / without",
            "ratio",
            ratios(&memory_rate, &plain_rate),
        )
        .note(format!("target ≥ {MEMORY_TARGET}")),
        Row::new(
            "memory: attempt spans exported / jobs drained",
            "ratio",
            vec![exported as f64 / drained.max(1) as f64],
        )
        .note(format!(
            "{in_trace} of {exported} children of the stored context"
        )),
    ])
}

/// Runs `bin --trace-part variant` on the bench's database; its report.
fn part(
    bench: &TraceBench<'_>,
    bin: &Path,
    variant: TraceVariant,
) -> Result<PartReport, ToolError> {
    let mut command = Command::new(bin);
    command
        .arg("--database-url")
        .arg(bench.server_url)
        .args(["bench", "--database", bench.database])
        .args(["--trace-part", variant.name()]);
    if bench.quick {
        command.arg("--quick");
    }
    let shown = format!("{} ... --trace-part {}", bin.display(), variant.name());
    let output = command
        .stdin(Stdio::null())
        .stderr(Stdio::inherit())
        .output()
        .map_err(|e| ToolError::Usage(format!("cannot run `{shown}`: {e}")))?;
    if !output.status.success() {
        return Err(ToolError::Usage(format!(
            "`{shown}` failed ({}); its errors are above",
            output.status
        )));
    }
    let stdout = String::from_utf8_lossy(&output.stdout);
    let report: PartReport = stdout
        .lines()
        .rev()
        .find_map(|line| serde_json::from_str(line).ok())
        .ok_or_else(|| {
            ToolError::Usage(format!(
                "`{shown}` printed no report (is it a `jobqueue` binary of this version?): \
                 {stdout}"
            ))
        })?;
    let wanted = variant != TraceVariant::Plain;
    if report.tracing_built != wanted {
        return Err(ToolError::Usage(if wanted {
            format!(
                "`{shown}` was built without the `tracing` feature: run the bench from a build with `--features tracing`"
            )
        } else {
            format!(
                "--plain-bin {} was built with the `tracing` feature; {PLAIN_BIN_HELP}",
                bin.display()
            )
        }));
    }
    Ok(report)
}
