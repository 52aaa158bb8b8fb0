//! The guide (`docs/`) is a valid mdBook, and the links of the README and
//! the guide lead somewhere: `SUMMARY.md` links every page of `docs/src/`
//! and only files that exist, and every relative link of the README, the
//! guide, the changelog and the benchmarks names an existing file and, for
//! a Markdown page, one of its headings. The code an application copies
//! (the examples, the code blocks of the README and the guide) names the
//! front crate `jobqueue` only, the one an application depends on.

use std::collections::BTreeSet;
use std::path::{Component, Path, PathBuf};

use jobqueue_tests::markdown;

const ROOT: &str = env!("CARGO_MANIFEST_DIR");

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The guide's source directory.
fn src() -> PathBuf {
    Path::new(ROOT).join("docs/src")
}

/// Every file under `docs/src/`, relative to it.
fn guide_files() -> BTreeSet<String> {
    let mut files = BTreeSet::new();
    let mut dirs = vec![src()];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display())) {
            let path = entry.expect("directory entry").path();
            if path.is_dir() {
                dirs.push(path);
            } else {
                let relative = path.strip_prefix(src()).expect("under docs/src");
                files.insert(relative.to_string_lossy().into_owned());
            }
        }
    }
    files
}

#[test]
fn the_book_has_its_configuration_and_its_summary() {
    let book = read(&Path::new(ROOT).join("docs/book.toml"));
    assert!(book.contains("[book]"), "docs/book.toml has a [book] table");
    assert!(
        book.lines()
            .any(|line| line.replace(' ', "") == "src=\"src\""),
        "docs/book.toml names src/ as the book's source"
    );
    let summary = read(&src().join("SUMMARY.md"));
    assert!(
        summary.starts_with("# Summary"),
        "SUMMARY.md begins with its title"
    );
}

#[test]
fn the_summary_links_every_page_and_only_pages_that_exist() {
    let summary = read(&src().join("SUMMARY.md"));
    let mut linked = BTreeSet::new();
    let mut in_list = false;
    for (number, line) in summary.lines().enumerate() {
        let number = number + 1;
        let trimmed = line.trim_start();
        if line.trim().is_empty() || (line.starts_with("# ") && !in_list) {
            continue;
        }
        // mdBook's summary: prefix chapters `[Title](page.md)`, then a list
        // of `- [Title](page.md)`, nested by four spaces.
        let item = if let Some(item) = trimmed.strip_prefix("- ") {
            let indent = line.len() - trimmed.len();
            assert!(
                indent % 4 == 0,
                "SUMMARY.md:{number}: nest items by four spaces: {line:?}"
            );
            in_list = true;
            item
        } else {
            assert!(
                !in_list,
                "SUMMARY.md:{number}: after the list, only list items: {line:?}"
            );
            trimmed
        };
        let (title, target) = item
            .strip_prefix('[')
            .and_then(|rest| rest.split_once("]("))
            .and_then(|(title, rest)| Some((title, rest.strip_suffix(')')?)))
            .unwrap_or_else(|| panic!("SUMMARY.md:{number}: not a link to a page: {line:?}"));
        assert!(!title.trim().is_empty(), "SUMMARY.md:{number}: no title");
        assert!(
            target.ends_with(".md") && !target.contains('#') && !target.starts_with('/'),
            "SUMMARY.md:{number}: a page of docs/src is expected, not {target:?}"
        );
        assert!(
            src().join(target).is_file(),
            "SUMMARY.md:{number}: {target} does not exist"
        );
        assert!(
            linked.insert(target.to_owned()),
            "SUMMARY.md:{number}: {target} is linked twice"
        );
    }
    let pages: BTreeSet<String> = guide_files()
        .into_iter()
        .filter(|file| file.ends_with(".md") && file != "SUMMARY.md")
        .collect();
    let unlinked: Vec<&String> = pages.difference(&linked).collect();
    assert!(
        unlinked.is_empty(),
        "pages of docs/src that SUMMARY.md does not link: {unlinked:?}"
    );
    let others: Vec<String> = guide_files()
        .into_iter()
        .filter(|file| !file.ends_with(".md"))
        .collect();
    assert!(
        others.is_empty(),
        "docs/src holds only the book's pages: {others:?}"
    );
}

#[test]
fn every_relative_link_leads_to_a_file_and_a_heading() {
    let mut pages: Vec<PathBuf> = ["README.md", "CHANGELOG.md", "BENCHMARKS.md"]
        .into_iter()
        .map(|page| Path::new(ROOT).join(page))
        .collect();
    pages.extend(
        guide_files()
            .into_iter()
            .filter(|file| file.ends_with(".md"))
            .map(|file| src().join(file)),
    );
    let mut checked = 0;
    let mut broken = Vec::new();
    for page in &pages {
        let text = read(page);
        let name = page
            .strip_prefix(ROOT)
            .unwrap_or(page)
            .display()
            .to_string();
        for (line, target) in markdown::links(&text) {
            if target.contains("://") || target.starts_with("mailto:") {
                continue;
            }
            checked += 1;
            let (path, anchor) = match target.split_once('#') {
                Some((path, anchor)) => (path, Some(anchor)),
                None => (target.as_str(), None),
            };
            let file = if path.is_empty() {
                page.clone()
            } else {
                normalize(&page.parent().expect("a page's directory").join(path))
            };
            if !file.exists() {
                broken.push(format!("{name}:{line}: {target}: no such file"));
                continue;
            }
            if page.starts_with(src()) && !file.starts_with(src()) {
                broken.push(format!(
                    "{name}:{line}: {target}: the book holds only docs/src; name files \
                     outside it as text"
                ));
                continue;
            }
            if let Some(anchor) = anchor {
                let is_markdown = file.extension().is_some_and(|ext| ext == "md");
                if !is_markdown || !markdown::anchors(&read(&file)).iter().any(|a| a == anchor) {
                    broken.push(format!("{name}:{line}: {target}: no such heading"));
                }
            }
        }
    }
    assert!(checked >= 20, "the README and the guide link their pages");
    assert!(broken.is_empty(), "broken links:\n{}", broken.join("\n"));
}

#[test]
fn examples_and_code_blocks_name_the_front_crate_only() {
    let mut offending = Vec::new();
    // Every example, whole: its comments are read as much as its code.
    let mut examples = Vec::new();
    let mut dirs = vec![Path::new(ROOT).join("examples")];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display())) {
            let path = entry.expect("directory entry").path();
            if path.is_dir() {
                dirs.push(path);
            } else if path.extension().is_some_and(|ext| ext == "rs") {
                examples.push(path);
            }
        }
    }
    examples.sort();
    for example in &examples {
        let name = example.strip_prefix(ROOT).unwrap_or(example).display();
        for (number, line) in read(example).lines().enumerate() {
            for path in sub_crate_paths(line) {
                offending.push(format!("{name}:{}: {path}: {}", number + 1, line.trim()));
            }
        }
    }
    // Every fenced code block of the README and the guide, whatever its
    // language.
    let mut pages = vec![Path::new(ROOT).join("README.md")];
    pages.extend(
        guide_files()
            .into_iter()
            .filter(|file| file.ends_with(".md"))
            .map(|file| src().join(file)),
    );
    let mut blocks = 0;
    let mut rust_blocks = 0;
    for page in &pages {
        let name = page.strip_prefix(ROOT).unwrap_or(page).display();
        for block in markdown::fenced_blocks(&read(page)) {
            blocks += 1;
            rust_blocks += usize::from(block.is_rust());
            for (index, line) in block.lines.iter().enumerate() {
                for path in sub_crate_paths(line) {
                    let number = block.line + 1 + index;
                    offending.push(format!("{name}:{number}: {path}: {}", line.trim()));
                }
            }
        }
    }
    assert!(
        examples.len() >= 5 && blocks >= 40 && rust_blocks >= 15,
        "the examples and the code blocks were read: {} examples, {blocks} blocks, \
         {rust_blocks} of them rust",
        examples.len()
    );
    assert!(
        offending.is_empty(),
        "an application depends on the front crate `jobqueue` alone: name `jobqueue::...` \
         (`jobqueue_core::X` is `jobqueue::X`; the runner, cli, dashboard and testing \
         crates are `jobqueue::runner`, `jobqueue::cli`, `jobqueue::dashboard`, \
         `jobqueue::testing`), not the crates behind it:\n{}",
        offending.join("\n")
    );
}

/// The crates behind the front crate that a line names as a path
/// (`jobqueue_core::Job`, `::jobqueue_runner::Runner`) or imports
/// (`use jobqueue_cli;`, `use jobqueue_testing as kit;`): every
/// `jobqueue_<name>` so used. A table's name (`jobqueue_jobs`) or a metric's
/// (`jobqueue_runner{...}`) is no path.
fn sub_crate_paths(line: &str) -> Vec<&str> {
    let is_ident = |c: char| c.is_ascii_alphanumeric() || c == '_';
    let mut found = Vec::new();
    let mut from = 0;
    while let Some(at) = line[from..].find("jobqueue_") {
        let start = from + at;
        let end = line[start..]
            .find(|c: char| !is_ident(c))
            .map_or(line.len(), |length| start + length);
        from = end;
        let before = &line[..start];
        if before.ends_with(is_ident) {
            continue;
        }
        let path = line[end..].starts_with("::");
        let import = before.ends_with(char::is_whitespace)
            && before
                .trim_end()
                .strip_suffix("use")
                .is_some_and(|rest| !rest.ends_with(is_ident));
        if path || import {
            found.push(&line[start..end]);
        }
    }
    found
}

#[test]
fn sub_crate_paths_are_found_and_names_are_not() {
    assert_eq!(
        sub_crate_paths("use jobqueue_core::{Job, JobId}; let x = ::jobqueue_runner::VERSION;"),
        ["jobqueue_core", "jobqueue_runner"]
    );
    assert_eq!(
        sub_crate_paths("    pub use jobqueue_testing as kit;"),
        ["jobqueue_testing"]
    );
    assert_eq!(
        sub_crate_paths("use {jobqueue_cli::Cli};"),
        ["jobqueue_cli"]
    );
    for fine in [
        "use jobqueue::{Job, Perform};",
        "jobqueue::runner::MetricsMode::Keep",
        "SELECT count(*) FROM jobqueue_jobs",
        "jobqueue_runner{worker_id=\"a\"} 1",
        "RUST_LOG=jobqueue_runner=debug",
        "myjobqueue_core::X; reuse jobqueue_core",
    ] {
        assert!(sub_crate_paths(fine).is_empty(), "{fine}");
    }
}

/// A path with its `.` and `..` components resolved (without touching the
/// file system).
fn normalize(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for component in path.components() {
        match component {
            Component::ParentDir => {
                out.pop();
            }
            Component::CurDir => {}
            other => out.push(other),
        }
    }
    out
}

/// The sample outputs of the guide that name the schema's migrations say
/// what the doctor says today: as many migrations as `jobqueue-core`
/// has, the latest by name.
#[test]
fn sample_outputs_name_the_migrations_there_are() {
    let folder = Path::new(ROOT).join("jobqueue-core/migrations");
    let mut names: Vec<String> = std::fs::read_dir(&folder)
        .unwrap_or_else(|e| panic!("{}: {e}", folder.display()))
        .map(|entry| entry.expect("an entry"))
        .filter(|entry| entry.path().join("up.sql").is_file())
        .map(|entry| entry.file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    let latest = names.last().expect("a migration");
    let says = format!("all {} migrations applied (latest {latest})", names.len());
    let mut samples = 0;
    let mut stale = Vec::new();
    let mut pages: Vec<PathBuf> = guide_files().iter().map(|f| src().join(f)).collect();
    pages.push(Path::new(ROOT).join("README.md"));
    for page in pages
        .iter()
        .filter(|p| p.extension().is_some_and(|e| e == "md"))
    {
        for (n, line) in read(page).lines().enumerate() {
            if let Some(at) = line.find(" migrations applied (latest ") {
                samples += 1;
                if !line.contains(&says) {
                    stale.push(format!(
                        "{}:{}: {}",
                        page.display(),
                        n + 1,
                        &line[..at + 40.min(line.len() - at)]
                    ));
                }
            }
        }
    }
    assert!(
        samples >= 2,
        "the doctor's sample outputs were found ({samples})"
    );
    assert!(
        stale.is_empty(),
        "sample outputs that do not say `{says}`:\n{}",
        stale.join("\n")
    );
}

/// Every feature of the front crate is named where an application reads
/// of them: the README's dependency line, the front crate's feature table
/// and the guide's getting-started page; and nothing there names a feature
/// the crate does not have.
#[test]
fn feature_lists_name_the_front_crates_features() {
    let manifest = read(&Path::new(ROOT).join("jobqueue/Cargo.toml"));
    let section = manifest
        .split("[features]")
        .nth(1)
        .and_then(|rest| rest.split("\n[").next())
        .expect("a [features] table");
    let features: Vec<&str> = section
        .lines()
        .filter_map(|line| line.split_once('=').map(|(name, _)| name.trim()))
        .filter(|name| !name.is_empty() && !name.starts_with('#') && *name != "default")
        .collect();
    assert!(
        features.len() >= 6,
        "the front crate's features: {features:?}"
    );
    let readme = read(&Path::new(ROOT).join("README.md"));
    let line = readme
        .lines()
        .find(|line| line.starts_with("jobqueue = \"0.1\"  # features:"))
        .expect("the README's dependency line");
    let docs = read(&Path::new(ROOT).join("jobqueue/src/lib.rs"));
    let table: Vec<&str> = docs
        .lines()
        .filter_map(|line| line.strip_prefix("//! | `"))
        .filter_map(|rest| rest.split('`').next())
        .filter(|name| *name != "feature")
        .collect();
    let started = read(&src().join("getting-started.md"));
    for feature in &features {
        assert!(
            line.contains(feature),
            "the README's dependency line names `{feature}`: {line}"
        );
        assert!(
            table.contains(feature),
            "the front crate's table names `{feature}`: {table:?}"
        );
        assert!(
            started.contains(&format!("`{feature}`")),
            "Getting started names `{feature}`"
        );
    }
    for named in &table {
        assert!(
            features.contains(named),
            "the table names `{named}`, not a feature"
        );
    }
}
