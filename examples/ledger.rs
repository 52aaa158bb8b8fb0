//! Per-key order: a ledger whose entries are applied one at a time per
//! account, in the order they were posted, however many workers and
//! runners work the queue. Each entry is a job keyed by its account
//! (`#[job(concurrency_key = "account")]`); the queue, declared ordered in code
//! (`QueueConfig`), keeps each key's jobs in order: its runner makes it so
//! at its start. With `DATABASE_URL` set: `cargo run --example ledger --
//! migrate`, `-- work --queues ledger` (in another terminal), then `-- post
//! 3 5` (five entries for each of three accounts).

use diesel::prelude::*;
use jobqueue::prelude::*;
use serde::{Deserialize, Serialize};

#[derive(Serialize, Deserialize, Job)]
#[job(type = "ledger.apply", queue = "ledger", concurrency_key = "account")]
struct ApplyEntry {
    account: u32,
    entry: u32,
    cents: i64,
}

impl Perform for ApplyEntry {
    fn perform(&self, _ctx: &mut JobContext<'_>) -> Result<(), JobError> {
        // Entries of one account never run side by side: a balance read
        // here and written back would never miss another entry's change.
        std::thread::sleep(std::time::Duration::from_millis(5));
        println!(
            "account {} entry {} applied ({:+} cents)",
            self.account, self.entry, self.cents
        );
        Ok(())
    }
}

/// Posts `per_account` entries to each of `accounts` accounts, in one
/// transaction, entry by entry in turn across the accounts.
fn post(conn: &mut PgConnection, accounts: u32, per_account: u32) -> Result<(), jobqueue::Error> {
    let entries: Vec<ApplyEntry> = (1..=per_account)
        .flat_map(|entry| {
            (1..=accounts).map(move |account| ApplyEntry {
                account,
                entry,
                cents: i64::from(entry) * 100,
            })
        })
        .collect();
    ApplyEntry::enqueue_many(conn, &entries).map(drop)
}

fn main() -> Result<std::process::ExitCode, Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    if let [_, command, accounts, per_account] = args.as_slice()
        && command == "post"
    {
        let mut conn = PgConnection::establish(&std::env::var("DATABASE_URL")?)?;
        post(&mut conn, accounts.parse()?, per_account.parse()?)?;
        return Ok(std::process::ExitCode::SUCCESS);
    }
    // The ledger's order is the code's to state: every environment's first
    // runner makes the queue ordered before its first claim.
    let ledger = jobqueue::QueueConfig::new("ledger").keys(jobqueue::KeyLimit::ordered());
    Ok(jobqueue::Cli::new()
        .register::<ApplyEntry>()
        .queue(ledger)
        .main())
}
