//! The package's examples as processes, for the tests that run them.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::mpsc::{self, Receiver};

/// Example `name`'s executable, built (or found up to date) by cargo with
/// the test's own profile and target directory: `cargo test --test X`
/// alone does not build the package's examples. Built as a part of the
/// workspace (`--workspace`), so its dependencies have the features that
/// `cargo test --workspace` (scripts/test) built them with, and a run of
/// the whole suite, which built the examples already, finds it up to date
/// instead of building the dependencies again for this package alone.
pub fn example_binary(name: &str) -> PathBuf {
    let mut command = cargo_command();
    let output = command
        .args([
            "build",
            "--workspace",
            "--example",
            name,
            "--message-format",
            "json-render-diagnostics",
        ])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .stderr(Stdio::inherit())
        .output()
        .expect("run cargo build");
    assert!(output.status.success(), "cargo build --example {name}");
    String::from_utf8_lossy(&output.stdout)
        .lines()
        .filter_map(|line| serde_json::from_str::<serde_json::Value>(line).ok())
        .filter(|message| message["target"]["name"] == name)
        .find_map(|message| message["executable"].as_str().map(PathBuf::from))
        .expect("cargo names the example's executable")
}

/// A `cargo` command (the one running the tests, `CARGO`) without what
/// cargo set for this test's own process (`CARGO_PKG_*`,
/// `CARGO_MANIFEST_*`, `OUT_DIR`, ...): those are not the build's, and a
/// build script that reads one (ring's reads `CARGO_MANIFEST_DIR`) would
/// see it changed and rebuild, here and again in the next `cargo test`.
pub fn cargo_command() -> Command {
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let mut command = Command::new(cargo);
    for (var, _) in std::env::vars_os() {
        let var = var.to_string_lossy();
        if var.starts_with("CARGO_PKG_")
            || var.starts_with("CARGO_MANIFEST_")
            || var.starts_with("CARGO_BIN_")
            || [
                "CARGO_CRATE_NAME",
                "CARGO_PRIMARY_PACKAGE",
                "CARGO_TARGET_TMPDIR",
                "OUT_DIR",
            ]
            .contains(&var.as_ref())
        {
            command.env_remove(var.as_ref());
        }
    }
    command
}

/// The lines `child` writes to its piped stdout, as they come, read on a
/// thread of their own (the channel closes when the child's stdout does).
pub fn stdout_lines(child: &mut Child) -> Receiver<String> {
    let stdout = child.stdout.take().expect("a piped stdout");
    let (lines, received) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { return };
            let _ = lines.send(line);
        }
    });
    received
}

/// The example at `binary` started as `binary work ARGS...` on the database
/// at `url`, its warnings logged and dropped, its stdout's lines read as
/// they come: the worker process and the receiver of its lines.
pub fn start_worker(
    binary: &std::path::Path,
    url: &str,
    args: &[&str],
) -> (Child, Receiver<String>) {
    let mut worker = Command::new(binary)
        .arg("work")
        .args(args)
        .env("DATABASE_URL", url)
        .env("RUST_LOG", "warn")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("start the worker");
    let lines = stdout_lines(&mut worker);
    (worker, lines)
}

/// Runs the example at `binary` once with `args` and `DATABASE_URL` set to
/// `url` (its own commands, which read it): what it printed and how it
/// exited.
pub fn run_example(binary: &Path, url: &str, args: &[&str]) -> Output {
    Command::new(binary)
        .args(args)
        .env("DATABASE_URL", url)
        .output()
        .expect("run the example")
}

/// Stops a worker started by [`start_worker`] as an operator does (SIGTERM)
/// and waits for it: the outcomes in hand are written first. Panics unless
/// it exits with success.
pub fn stop_worker(mut worker: Child) {
    assert!(
        crate::fault::signal_pid(worker.id(), "TERM"),
        "kill -TERM the worker"
    );
    assert!(worker.wait().expect("wait for the worker").success());
}
