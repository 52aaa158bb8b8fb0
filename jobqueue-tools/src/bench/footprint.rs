//! The runner's footprint as its own process: CPU while idle, and peak RSS
//! after working a batch at the configured worker count.

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use diesel::{Connection, PgConnection};

use super::enqueue::{build, insert};
use super::{Row, Sizes, count, db, reset};
use crate::ToolError;

/// Jobs worked before reading the peak RSS.
const RSS_JOBS: usize = 20_000;

/// Kills the child when dropped (on every path out, errors included).
struct Worker(Child);

impl Drop for Worker {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn proc_file(pid: u32, file: &str) -> Result<String, ToolError> {
    Ok(std::fs::read_to_string(format!("/proc/{pid}/{file}"))?)
}

/// CPU time (user + system) of `pid`, in clock ticks.
fn cpu_ticks(pid: u32) -> Result<u64, ToolError> {
    let stat = proc_file(pid, "stat")?;
    // Fields after the command name (which may hold spaces) start after ')'.
    let rest = stat.rsplit_once(')').map(|(_, rest)| rest).unwrap_or("");
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let field = |i: usize| {
        fields
            .get(i)
            .and_then(|f| f.parse::<u64>().ok())
            .unwrap_or(0)
    };
    // utime and stime are fields 14 and 15 of stat: 12 and 13 after ')'.
    Ok(field(11) + field(12))
}

fn clock_ticks_per_sec() -> f64 {
    Command::new("getconf")
        .arg("CLK_TCK")
        .output()
        .ok()
        .and_then(|out| String::from_utf8_lossy(&out.stdout).trim().parse().ok())
        .unwrap_or(100.0)
}

/// Peak resident set (VmHWM) of `pid`, in MiB.
fn peak_rss_mib(pid: u32) -> Result<f64, ToolError> {
    let status = proc_file(pid, "status")?;
    let kib = status
        .lines()
        .find_map(|line| line.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<f64>().ok())
        .unwrap_or(f64::NAN);
    Ok(kib / 1024.0)
}

/// Runs this very binary's `work` as the runner process, so the binary must
/// handle [`super::BenchNoop`] (the `jobqueue` binary does: see
/// [`crate::registry`]).
pub(crate) fn measure(url: &str, sizes: &Sizes, runs: usize) -> Result<Vec<Row>, ToolError> {
    let mut conn = PgConnection::establish(url).map_err(db)?;
    let exe = std::env::current_exe()?;
    let tick = clock_ticks_per_sec();
    let (mut idle, mut rss) = (Vec::new(), Vec::new());
    for _ in 0..runs {
        reset(&mut conn)?;
        let child = Command::new(&exe)
            .arg("--database-url")
            .arg(url)
            .arg("work")
            .arg("--concurrency")
            .arg(sizes.footprint_workers.to_string())
            .stdout(Stdio::null())
            .stderr(Stdio::inherit())
            .spawn()?;
        let worker = Worker(child);
        let pid = worker.0.id();
        std::thread::sleep(Duration::from_secs(2));
        let (t0, c0) = (Instant::now(), cpu_ticks(pid)?);
        std::thread::sleep(sizes.idle_window);
        let (secs, ticks) = (t0.elapsed().as_secs_f64(), cpu_ticks(pid)? - c0);
        idle.push(ticks as f64 / tick / secs * 100.0);
        insert(&mut conn, &build(RSS_JOBS)?)?;
        let deadline = Instant::now() + Duration::from_secs(120);
        // Worked once none is left to work (completed rows are deleted by
        // default, so they are not counted).
        while count(&mut conn, "status IN ('pending', 'claimed', 'running')")? > 0 {
            if Instant::now() > deadline {
                return Err(ToolError::Usage(
                    "footprint: the worker did not finish its jobs".into(),
                ));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        rss.push(peak_rss_mib(pid)?);
    }
    Ok(vec![
        Row::new(
            format!(
                "idle runner CPU, {} workers, over {:?}",
                sizes.footprint_workers, sizes.idle_window
            ),
            "% core",
            idle,
        ),
        Row::new(
            format!(
                "peak RSS, {} workers, after {RSS_JOBS} jobs",
                sizes.footprint_workers
            ),
            "MiB",
            rss,
        ),
    ])
}
