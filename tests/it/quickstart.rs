//! The README's quick start, built as the application it describes: its
//! dependencies (the `toml` block) and its files (the `rust` blocks, each
//! naming its file on its first line, `// src/lib.rs`), exactly as written,
//! make a crate of their own outside the workspace, whose dependencies on `jobqueue` and `jobqueue-*` point
//! at this checkout (with the version requirements and features the README
//! shows). It must build without a warning, and its worker binary must run.
//!
//! The crate lives under the workspace's target directory
//! (`<target>/quickstart/`), at a fixed place, and builds into that target
//! directory with the workspace's profile settings (copied into its
//! manifest): the dependencies it shares with the workspace, same versions
//! and features, are the workspace's own builds rather than a second
//! compilation of each, and a second run only checks what changed. Cargo
//! runs `--offline` first: every dependency is in the workspace's lockfile
//! (copied in, so the versions are the workspace's) and so in the local
//! registry cache; a build that still needs the network is run again
//! online.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use jobqueue_tests::markdown::{self, Block};

const ROOT: &str = env!("CARGO_MANIFEST_DIR");

/// The name the quick start gives the application crate (its worker uses
/// the library as `myapp::...`).
const CRATE: &str = "myapp";

#[test]
fn the_quick_start_builds_as_an_application_crate() {
    let readme = std::fs::read_to_string(format!("{ROOT}/README.md")).expect("README.md");
    let region = markdown::quickstart(&readme).expect(
        "README.md marks its quick start with <!-- quickstart --> ... <!-- /quickstart -->",
    );
    let blocks = markdown::fenced_blocks(region);
    let toml: Vec<&Block> = blocks.iter().filter(|b| b.language() == "toml").collect();
    assert_eq!(
        toml.len(),
        1,
        "the quick start shows its dependencies in one ```toml block"
    );
    let files: Vec<(&str, &Block)> = blocks
        .iter()
        .filter(|b| b.is_rust())
        .map(|b| {
            let file = markdown::file_of(b).unwrap_or_else(|| {
                panic!(
                    "each ```rust block of the quick start names its file on its first line \
                     (`// src/lib.rs`); this one does not:\n{}",
                    b.text()
                )
            });
            (file, b)
        })
        .collect();
    assert!(
        files.iter().any(|(file, _)| *file == "src/main.rs"),
        "the quick start shows a worker binary (src/main.rs)"
    );
    for (file, _) in &files {
        assert_eq!(
            files.iter().filter(|(other, _)| other == file).count(),
            1,
            "{file} is shown twice"
        );
    }

    let build_dir = target_dir();
    let app = build_dir.join("quickstart").join(CRATE);
    let workspace = std::fs::read_to_string(format!("{ROOT}/Cargo.toml")).expect("Cargo.toml");
    let manifest = format!(
        "[package]\nname = \"{CRATE}\"\nversion = \"0.1.0\"\nedition = \"2024\"\npublish = false\n\n\
         {}\n\
         [lints.rust]\nwarnings = \"deny\"\n\n\
         # Not a member of the jobqueue workspace above it.\n[workspace]\n\n\
         # The workspace's profile settings, as its builds are shared.\n{}",
        with_paths(&toml[0].text()),
        profile_sections(&workspace)
    );
    write_if_changed(&app.join("Cargo.toml"), &manifest);
    // The workspace's versions: the build resolves offline, and to what the
    // workspace itself was tested with.
    let lock = std::fs::read_to_string(format!("{ROOT}/Cargo.lock")).expect("Cargo.lock");
    write_if_changed(&app.join("Cargo.lock"), &lock);
    remove_stale_sources(&app, &files);
    for (file, block) in &files {
        write_if_changed(&app.join(file), &block.text());
    }

    let started = Instant::now();
    let offline = cargo_build(&app, &build_dir, true);
    let output = if !offline.status.success() && needs_network(&offline.stderr) {
        eprintln!("the offline build needs the network; building online");
        cargo_build(&app, &build_dir, false)
    } else {
        offline
    };
    eprintln!(
        "quick start built in {:.1} s (in {})",
        started.elapsed().as_secs_f64(),
        build_dir.display()
    );
    assert!(
        output.status.success(),
        "the README's quick start does not build as written ({}):\n{}",
        app.display(),
        String::from_utf8_lossy(&output.stderr)
    );

    // The worker binary runs: its command line lists the commands.
    let worker = build_dir.join("debug").join(CRATE);
    let help = Command::new(&worker)
        .arg("--help")
        .env_remove("DATABASE_URL")
        .output()
        .unwrap_or_else(|e| panic!("{}: {e}", worker.display()));
    let text = String::from_utf8_lossy(&help.stdout);
    assert!(help.status.success(), "{}: {:?}", worker.display(), help);
    for command in ["migrate", "work", "enqueue", "doctor"] {
        assert!(text.contains(command), "`{command}` missing from:\n{text}");
    }
}

/// The dependency lines of the quick start with a `path` into this
/// checkout added to each `jobqueue` or `jobqueue-*` dependency, keeping its version
/// requirement and features.
fn with_paths(toml: &str) -> String {
    let mut out = String::new();
    let mut rewritten = 0;
    for line in toml.lines() {
        let trimmed = line.trim();
        let name = trimmed.split('=').next().unwrap_or("").trim();
        assert!(
            !trimmed.contains("path =") && !trimmed.contains("git ="),
            "the quick start shows the crates as they are published, not `{trimmed}`"
        );
        if !(name == "jobqueue" || name.starts_with("jobqueue-")) || !trimmed.contains('=') {
            out.push_str(line);
            out.push('\n');
            continue;
        }
        let path = format!("{ROOT}/{name}");
        assert!(
            Path::new(&path).join("Cargo.toml").exists(),
            "the quick start depends on `{name}`, which is no crate of this workspace"
        );
        let value = trimmed.split_once('=').map_or("", |(_, value)| value);
        // The README's values hold no `#`: what follows one is a comment.
        let value = value.split('#').next().unwrap_or("").trim();
        let line = if value.starts_with('"') {
            format!("{name} = {{ version = {value}, path = {path:?} }}")
        } else if let Some(rest) = value.strip_prefix('{') {
            assert!(
                rest.contains("version"),
                "`{name}` in the quick start gives no version"
            );
            format!("{name} = {{ path = {path:?},{rest}")
        } else {
            panic!("`{trimmed}`: a version string or an inline table was expected");
        };
        out.push_str(&line);
        out.push('\n');
        rewritten += 1;
    }
    assert!(
        rewritten > 0,
        "the quick start depends on no jobqueue crate:\n{toml}"
    );
    out
}

/// The workspace's target directory: where this test binary was built
/// (`<target>/debug/deps/quickstart-...`).
fn target_dir() -> PathBuf {
    std::env::current_exe()
        .ok()
        .and_then(|exe| Some(exe.parent()?.parent()?.parent()?.to_path_buf()))
        .filter(|dir| dir.join("debug").is_dir() || dir.join("release").is_dir())
        .unwrap_or_else(|| PathBuf::from(ROOT).join("target"))
}

/// The `[profile.*]` sections of a manifest, each whole.
fn profile_sections(manifest: &str) -> String {
    let mut out = String::new();
    let mut inside = false;
    for line in manifest.lines() {
        if line.starts_with('[') {
            inside = line.starts_with("[profile.");
        }
        if inside {
            out.push_str(line);
            out.push('\n');
        }
    }
    out
}

fn cargo_build(app: &Path, build_dir: &Path, offline: bool) -> std::process::Output {
    let mut command = jobqueue_tests::example::cargo_command();
    command
        .arg("build")
        .arg("--quiet")
        .current_dir(app)
        .env("CARGO_TARGET_DIR", build_dir);
    if offline {
        command.arg("--offline");
    }
    command
        .output()
        .unwrap_or_else(|e| panic!("cargo build in {}: {e}", app.display()))
}

/// Whether a failed offline build failed for want of the network (a crate
/// or index entry not in the local cache) rather than on the code.
fn needs_network(stderr: &[u8]) -> bool {
    let stderr = String::from_utf8_lossy(stderr);
    stderr.contains("offline") || stderr.contains("failed to download")
}

/// Writes `text` unless the file already holds it, so an unchanged file
/// keeps its modification time and the next build reuses its artifacts.
fn write_if_changed(path: &Path, text: &str) {
    if std::fs::read_to_string(path).is_ok_and(|old| old == text) {
        return;
    }
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
    }
    std::fs::write(path, text).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
}

/// Removes source files an earlier quick start had and this one does not.
fn remove_stale_sources(app: &Path, files: &[(&str, &Block)]) {
    let keep: Vec<PathBuf> = files.iter().map(|(file, _)| app.join(file)).collect();
    let mut dirs = vec![app.join("src")];
    while let Some(dir) = dirs.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            if path.is_dir() {
                dirs.push(path);
            } else if !keep.contains(&path) {
                std::fs::remove_file(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            }
        }
    }
}
