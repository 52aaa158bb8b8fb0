//! What the commands print on standard output, written so that a reader
//! that goes away early (`jobqueue list | head -1`) ends the command
//! quietly instead of panicking: every write returns its error, a closed
//! pipe among them, and [`crate::Cli::main_with`] exits 0 on it without a
//! word (see [`CliError::is_closed_pipe`]).

use std::io::Write;

use crate::CliError;

/// Writes `args` and a line break to standard output; the write's error,
/// a closed pipe included, as [`CliError::Output`].
pub(crate) fn line(args: std::fmt::Arguments<'_>) -> Result<(), CliError> {
    let mut out = std::io::stdout().lock();
    out.write_fmt(args)
        .and_then(|()| out.write_all(b"\n"))
        .map_err(CliError::Output)
}

/// Writes `data` to standard output as it is (a completion script, a man
/// page); the write's error as [`line`]'s.
pub(crate) fn bytes(data: &[u8]) -> Result<(), CliError> {
    let mut out = std::io::stdout().lock();
    out.write_all(data)
        .and_then(|()| out.flush())
        .map_err(CliError::Output)
}

/// Writes `value` as one JSON document: pretty, for the commands that print
/// one (`show`, `stats`, `queue list`, `runners`, `cron list`, `doctor`).
pub(crate) fn json_document<T: serde::Serialize>(value: &T) -> Result<(), CliError> {
    let text = serde_json::to_string_pretty(value).map_err(json_error)?;
    line(format_args!("{text}"))
}

/// Writes `value` as one line of JSON (`list`: one line per job).
pub(crate) fn json_line<T: serde::Serialize>(value: &T) -> Result<(), CliError> {
    let text = serde_json::to_string(value).map_err(json_error)?;
    line(format_args!("{text}"))
}

/// Turning a value the CLI built into JSON failed: a defect, reported as
/// an error rather than a panic.
fn json_error(error: serde_json::Error) -> CliError {
    CliError::Output(std::io::Error::other(error))
}

/// `println!` whose failure is returned: `outln!("{x}")?`.
macro_rules! outln {
    () => {
        $crate::output::line(format_args!(""))
    };
    ($($arg:tt)*) => {
        $crate::output::line(format_args!($($arg)*))
    };
}

pub(crate) use outln;
