//! The cost of the `tracing` feature: the enqueue latency and the drain
//! rate of a build without the feature (`--plain-bin`), of this build (the
//! feature in) with no subscriber, and of this build with a subscriber that
//! exports to memory. Each is a process of its own ([`super::trace_part`]),
//! run in turn within each run (the order rotated from one run to the
//! next) so that the three share the machine's noise.

use std::path::Path;
use std::process::{Command, Stdio};

use super::drain::WORKERS;
use super::trace_part::{ENQUEUE_BLOCKS, PartReport, TraceVariant, drain_cpu, drain_rate};
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
    let exported: u64 = memory.iter().map(|r| r.attempt_spans).sum();
    let in_trace: u64 = memory.iter().map(|r| r.attempts_in_trace).sum();
    let drained: u64 = memory.iter().map(|r| r.jobs_drained).sum();
    let reports = [&plain[..], &off[..], &memory[..]];
    let of = |figure: fn(&PartReport) -> f64| reports.map(|r| r.iter().map(figure).collect());
    let (jobs, drains) = (sizes.trace_drain_jobs, sizes.trace_drains);
    let enqueues = sizes.trace_enqueues;
    let mut rows = compare(
        "enqueue latency",
        "µs",
        of(|r| r.enqueue_us),
        [
            format!(
                "one job per transaction, one connection; median of {ENQUEUE_BLOCKS} blocks' \
                 means, {enqueues} enqueues a run"
            ),
            format!("target ≤ {ENQUEUE_TARGET}"),
            "each in a `request` span; no target".into(),
        ],
    );
    rows.extend(compare(
        "enqueue CPU per job",
        "µs",
        of(|r| r.enqueue_cpu_us),
        [
            "the process's CPU time over the same enqueues".into(),
            String::new(),
            "the exporter's thread included".into(),
        ],
    ));
    rows.extend(compare(
        "drain rate",
        "jobs/s",
        of(drain_rate),
        [
            format!(
                "{jobs} jobs, {WORKERS} workers, as the drain rows; median of {drains} drains a run"
            ),
            format!("target ≥ {DRAIN_TARGET}"),
            format!("to the last span exported; target ≥ {MEMORY_TARGET}"),
        ],
    ));
    rows.extend(compare(
        "drain CPU per job",
        "µs",
        of(drain_cpu),
        [
            "the process's over the same drains: runner and enqueuer, not the server".into(),
            String::new(),
            String::new(),
        ],
    ));
    rows.push(
        Row::new(
            "memory: attempt spans exported / jobs drained",
            "ratio",
            vec![exported as f64 / drained.max(1) as f64],
        )
        .note(format!(
            "{in_trace} of {exported} children of the stored context"
        )),
    );
    Ok(rows)
}

/// The rows of one figure: its values built without the feature, with it
/// and no subscriber, their ratio, with a subscriber exporting to memory,
/// and its ratio to the first; `notes` for the first row and the two
/// ratios.
fn compare(
    name: &str,
    unit: &'static str,
    [plain, off, memory]: [Vec<f64>; 3],
    notes: [String; 3],
) -> Vec<Row> {
    let ratios =
        |a: &[f64], b: &[f64]| -> Vec<f64> { a.iter().zip(b).map(|(a, b)| a / b).collect() };
    let [plain_note, off_note, memory_note] = notes;
    vec![
        Row::new(format!("{name}, without `tracing`"), unit, plain.clone()).note(plain_note),
        Row::new(
            format!("{name}, `tracing`, no subscriber"),
            unit,
            off.clone(),
        ),
        Row::new(
            format!("{name}: no subscriber / without"),
            "ratio",
            ratios(&off, &plain),
        )
        .note(off_note),
        Row::new(
            format!("{name}, `tracing`, memory export"),
            unit,
            memory.clone(),
        ),
        Row::new(
            format!("{name}: memory export / without"),
            "ratio",
            ratios(&memory, &plain),
        )
        .note(memory_note),
    ]
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
