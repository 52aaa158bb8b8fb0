//! `completions` and `man`: the shell completion scripts and the man pages,
//! generated from the command definitions themselves (clap_complete,
//! clap_mangen), those a binary adds (see [`crate::Extra`]) included, and
//! named after the binary that prints them, so that an application's
//! worker binary completes and documents its own name.

use std::path::Path;

use clap_complete::Shell;

use crate::CliError;
use crate::output::bytes;

/// Prints `shell`'s completion script for `command`, run as `bin_name`.
pub(crate) fn completions(
    mut command: clap::Command,
    bin_name: &str,
    shell: Shell,
) -> Result<(), CliError> {
    // The generators panic on a failed write: they write to memory, and the
    // script goes out through `bytes`, which reports a closed pipe.
    let mut script = Vec::new();
    if shell == Shell::Bash && bin_name.contains('-') {
        // clap_complete's bash script for a name with a hyphen completes
        // nothing past the first subcommand (its states are spelt two ways,
        // clap-rs/clap#6421): it is made for the name with underscores and
        // registered for the real one.
        let plain = bin_name.replace('-', "_");
        clap_complete::generate(shell, &mut command, plain.as_str(), &mut script);
        let script = String::from_utf8_lossy(&script);
        return bytes(register_as(&script, &plain, bin_name).as_bytes());
    }
    clap_complete::generate(shell, &mut command, bin_name, &mut script);
    bytes(&script)
}

/// `script` with its `complete ... NAME` lines registering its functions
/// for `bin_name` instead of `plain`.
fn register_as(script: &str, plain: &str, bin_name: &str) -> String {
    let suffix = format!(" {plain}");
    script
        .lines()
        .map(|line| match line.strip_suffix(&suffix) {
            Some(head) if line.trim_start().starts_with("complete ") => {
                format!("{head} {bin_name}\n")
            }
            _ => format!("{line}\n"),
        })
        .collect()
}

/// Prints the man page of `command`, run as `bin_name`, in roff; or, with
/// `dir`, writes one page per command and subcommand there
/// (`BIN.1`, `BIN-queue-list.1`, ...) and says where.
pub(crate) fn man(
    command: clap::Command,
    bin_name: &str,
    dir: Option<&Path>,
) -> Result<(), CliError> {
    let command = command
        .bin_name(bin_name.to_owned())
        .display_name(bin_name.to_owned());
    match dir {
        None => {
            let mut page = Vec::new();
            clap_mangen::Man::new(command)
                .render(&mut page)
                .map_err(CliError::Output)?;
            bytes(&page)
        }
        Some(dir) => {
            let unwritable = |e: std::io::Error| {
                CliError::Usage(format!(
                    "--dir {}: cannot write the man pages there: {e}",
                    dir.display()
                ))
            };
            std::fs::create_dir_all(dir).map_err(unwritable)?;
            clap_mangen::generate_to(command, dir).map_err(unwritable)?;
            crate::output::outln!("wrote the man pages to {}", dir.display())
        }
    }
}

/// The name the binary was run as (the file name of `argv[0]`), which its
/// completions and man pages carry; `jobqueue` when there is none.
pub(crate) fn bin_name(argv0: Option<&std::ffi::OsString>) -> String {
    argv0
        .and_then(|arg| Path::new(arg).file_name())
        .and_then(|name| name.to_str())
        .unwrap_or("jobqueue")
        .to_owned()
}
