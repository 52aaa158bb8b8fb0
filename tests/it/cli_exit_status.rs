//! The CLI's exit codes, one per outcome a script tells apart (the table
//! in the guide's page on the command): 0 success, 1 a check failed (or
//! the database's state refused the command), 2 bad input, 3 the database
//! unreachable.

use jobqueue_cli::{EXIT_BAD_INPUT, EXIT_FAILED, EXIT_SUCCESS, EXIT_UNREACHABLE};
use jobqueue_tests::{TestDb, run_cli};

/// An application's worker binary: the operational commands.
const CLI: &str = env!("CARGO_BIN_EXE_jobqueue-test-worker");

/// A URL of a server that is not there: nothing listens on port 1.
const NOWHERE: &str = "postgres://app@127.0.0.1:1/app?connect_timeout=2";

fn code(url: &str, args: &[&str]) -> (i32, String) {
    let (code, _, stderr) = run_cli(CLI, url, args);
    (code.expect("an exit code, not a signal"), stderr)
}

#[test]
fn each_outcome_has_its_exit_code() {
    assert_eq!(
        (EXIT_SUCCESS, EXIT_FAILED, EXIT_BAD_INPUT, EXIT_UNREACHABLE),
        (0, 1, 2, 3),
        "the documented codes"
    );
    let db = TestDb::new();
    for args in [
        &["stats"][..],
        &["list"],
        &["doctor"],
        &["doctor", "--json"],
    ] {
        let (code, stderr) = code(&db.url, args);
        assert_eq!(code, 0, "{args:?}: {stderr}");
    }

    // A check failed: a database without the schema fails `migrations`.
    let bare = TestDb::unmigrated();
    for args in [&["doctor"][..], &["doctor", "--json"]] {
        let (code, stderr) = code(&bare.url, args);
        assert_eq!(code, 1, "{args:?}: {stderr}");
        assert!(stderr.contains("checks failed: migrations"), "{stderr}");
    }
    // The database's state refused the command.
    let (code_of_gone, stderr) = code(
        &db.url,
        &["cancel", &jobqueue_core::JobId::new().to_string()],
    );
    assert_eq!(code_of_gone, 1, "{stderr}");

    // Bad input: refused before anything was done, the database not
    // even reached.
    for args in [
        &["list", "--limit", "0"][..],
        &["list", "--status", "sleeping"],
        &["show", "not-an-id"],
        &["doctor", "--xact-warn", "soon"],
        &["no-such-command"],
    ] {
        let (code, stderr) = code(NOWHERE, args);
        assert_eq!(code, 2, "{args:?}: {stderr}");
    }

    // The database unreachable, whatever the command.
    for args in [
        &["stats"][..],
        &["list"],
        &["migrate"],
        &["doctor"],
        &["doctor", "--json"],
        &["queue", "list"],
    ] {
        let (code, stderr) = code(NOWHERE, args);
        assert_eq!(code, 3, "{args:?}: {stderr}");
        assert!(
            stderr.starts_with("jobqueue-test-worker: error: cannot connect to the database"),
            "{args:?}: {stderr}"
        );
    }
}
