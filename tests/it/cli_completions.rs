//! `completions` and `man`: shell completion scripts and man pages made
//! from the command definitions, for the binary that prints them (an
//! application's worker binary, with the commands it adds), with no
//! database.

use std::process::{Command, Output};

/// An application's worker binary: the operational commands.
const CLI: &str = env!("CARGO_BIN_EXE_jobqueue-test-worker");
/// A binary that adds commands of its own (`demo`, `bench`).
const TOOLS: &str = env!("CARGO_BIN_EXE_jobqueue-test-tools");

/// Runs `bin` with `args` and no database anywhere.
fn run(bin: &str, args: &[&str]) -> Output {
    Command::new(bin)
        .env_remove("DATABASE_URL")
        .args(args)
        .output()
        .expect("run the binary")
}

/// The standard output of `bin args`, which must succeed.
fn printed(bin: &str, args: &[&str]) -> String {
    let out = run(bin, args);
    assert!(
        out.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).expect("UTF-8")
}

/// The file name of `bin`, as a shell calls it.
fn name(bin: &str) -> &str {
    std::path::Path::new(bin)
        .file_name()
        .and_then(|n| n.to_str())
        .expect("a file name")
}

/// What bash offers for the last of `words` (the first is the binary's
/// name), through the script `bin completions bash` prints, run by the
/// function it registers for the binary's name.
fn bash_offers(bin: &str, words: &[&str]) -> Vec<String> {
    let script = std::env::temp_dir().join(format!("jq-completions-{}.bash", fastrand::u64(..)));
    std::fs::write(&script, printed(bin, &["completions", "bash"])).expect("write the script");
    let quoted: Vec<String> = words.iter().map(|w| format!("'{w}'")).collect();
    let program = format!(
        r#"source '{script}'
function=$(complete -p '{name}' | sed -E 's/.* -F ([^ ]+).*/\1/')
COMP_WORDS=({words})
COMP_CWORD=$(( ${{#COMP_WORDS[@]}} - 1 ))
"$function" '{name}' "${{COMP_WORDS[COMP_CWORD]}}" "${{COMP_WORDS[COMP_CWORD-1]}}"
printf '%s\n' "${{COMPREPLY[@]}}""#,
        script = script.display(),
        name = name(bin),
        words = quoted.join(" "),
    );
    let out = Command::new("bash")
        .args(["--norc", "-c", &program])
        .output()
        .expect("run bash");
    let _ = std::fs::remove_file(&script);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(str::to_owned)
        .collect()
}

#[test]
fn bash_completes_the_binarys_own_name_commands_and_flags() {
    let cli = name(CLI);
    assert!(cli.contains('-'), "a name with a hyphen: {cli}");
    assert!(bash_offers(CLI, &[cli, "qu"]).contains(&"queue".to_owned()));
    assert_eq!(bash_offers(CLI, &[cli, "queue", "list", "--j"]), ["--json"]);
    assert_eq!(
        bash_offers(CLI, &[cli, "stats", "--h"]),
        ["--history", "--help"]
    );
    let shells = bash_offers(CLI, &[cli, "completions", ""]);
    for shell in ["bash", "zsh", "fish", "elvish", "powershell"] {
        assert!(shells.contains(&shell.to_owned()), "{shells:?}");
    }
    // The commands a binary adds are completed too; a worker binary has
    // none of them.
    let tools = name(TOOLS);
    assert_eq!(bash_offers(TOOLS, &[tools, "de"]), ["delete", "demo"]);
    assert_eq!(bash_offers(CLI, &[cli, "de"]), ["delete"]);
}

#[test]
fn every_shell_gets_a_script_for_the_binarys_name() {
    for shell in ["bash", "zsh", "fish", "elvish", "powershell"] {
        let script = printed(CLI, &["completions", shell]);
        for part in [name(CLI), "doctor", "queue", "json", "history"] {
            assert!(script.contains(part), "{shell}: no {part}");
        }
    }
    let out = run(CLI, &["completions", "tcsh"]);
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("possible values: bash"), "{stderr}");
}

#[test]
fn man_prints_the_page_of_the_binary_and_writes_one_per_command() {
    let page = printed(CLI, &["man"]);
    let escaped = name(CLI).replace('-', "\\-");
    assert!(
        page.contains(&format!(".TH {} 1", name(CLI))),
        "a page titled with the binary's name:\n{page}"
    );
    for part in [
        ".SH SYNOPSIS",
        ".SH OPTIONS",
        ".SH SUBCOMMANDS",
        &format!("{escaped}\\-doctor(1)"),
        &format!("{escaped}\\-queue(1)"),
        "DATABASE_URL",
    ] {
        assert!(page.contains(part), "no {part} in\n{page}");
    }

    let dir = std::env::temp_dir().join(format!("jq-man-{}", fastrand::u64(..)));
    let said = printed(TOOLS, &["man", "--dir", dir.to_str().expect("UTF-8")]);
    assert!(said.contains(&dir.display().to_string()), "{said}");
    let tools = name(TOOLS);
    for page in [
        "",
        "-list",
        "-queue-list",
        "-cron-pause",
        "-doctor",
        "-demo",
    ] {
        let file = dir.join(format!("{tools}{page}.1"));
        let text =
            std::fs::read_to_string(&file).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
        assert!(text.contains(".TH "), "{}", file.display());
    }
    let queue_list = std::fs::read_to_string(dir.join(format!("{tools}-queue-list.1")))
        .expect("the page of `queue list`");
    assert!(queue_list.contains("\\-\\-json"), "{queue_list}");
    std::fs::remove_dir_all(&dir).expect("remove the pages");
}
