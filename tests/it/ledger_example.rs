//! The ledger example (`examples/ledger.rs`) as an operator runs it: a
//! worker process with eight workers, whose code declares the queue
//! ordered per key, then entries posted for three accounts in one
//! transaction: each account's entries are applied in posting order,
//! one at a time, while the accounts' entries interleave.

use std::collections::BTreeMap;

use jobqueue_tests::example::{example_binary, run_example, start_worker, stop_worker};
use jobqueue_tests::{TestDb, WAIT_LIMIT, assert_success, scalar, wait_for};

const ACCOUNTS: u32 = 3;
const ENTRIES: u32 = 6;

#[test]
fn each_accounts_entries_are_applied_in_posting_order() {
    let (db, mut conn) = TestDb::connected();
    let example = example_binary("ledger");
    let run = |args: &[&str]| run_example(&example, &db.url, args);
    let (mut worker, applied) = start_worker(
        &example,
        &db.url,
        &["--queues", "ledger", "--concurrency", "8"],
    );
    // Once its runner registered, the declaration was applied: no command
    // made the queue ordered.
    wait_for("the worker registered", WAIT_LIMIT, || {
        scalar(
            &mut conn,
            "SELECT count(*) AS n FROM jobqueue_runners WHERE 'ledger' = ANY(queues)",
        ) > 0
    });
    assert_eq!(
        scalar(
            &mut conn,
            "SELECT count(*) AS n FROM jobqueue_queues \
             WHERE name = 'ledger' AND key_ordered AND key_limit = 1"
        ),
        1,
        "the ledger is ordered as its code declares"
    );
    assert_success(
        "post",
        &run(&["post", &ACCOUNTS.to_string(), &ENTRIES.to_string()]),
    );

    let mut by_account: BTreeMap<u32, Vec<u32>> = BTreeMap::new();
    let mut lines = Vec::new();
    for _ in 0..ACCOUNTS * ENTRIES {
        let line = applied.recv_timeout(WAIT_LIMIT).unwrap_or_else(|e| {
            let _ = worker.kill();
            panic!(
                "not every entry applied ({e}); so far:\n{}",
                lines.join("\n")
            )
        });
        let mut words = line.split_whitespace();
        let (Some("account"), Some(account), Some("entry"), Some(entry)) =
            (words.next(), words.next(), words.next(), words.next())
        else {
            panic!("not an entry line: {line}");
        };
        by_account
            .entry(account.parse().expect("an account"))
            .or_default()
            .push(entry.parse().expect("an entry"));
        lines.push(line);
    }
    stop_worker(worker);

    println!("applied:\n{}", lines.join("\n"));
    let in_order: Vec<u32> = (1..=ENTRIES).collect();
    for account in 1..=ACCOUNTS {
        assert_eq!(
            by_account.get(&account),
            Some(&in_order),
            "account {account}'s entries, as applied"
        );
    }
    // Accounts are not ordered among themselves: their entries interleave
    // (run one account after another, the lines would switch account only
    // twice).
    let account_of = |line: &String| line.split_whitespace().nth(1).map(str::to_owned);
    let switches = lines
        .windows(2)
        .filter(|pair| account_of(&pair[0]) != account_of(&pair[1]))
        .count();
    assert!(
        switches > (ACCOUNTS - 1) as usize,
        "the accounts' entries ran one account after another"
    );
}
