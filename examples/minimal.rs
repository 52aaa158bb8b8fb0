//! The smallest application: a job type, its enqueue inside a web
//! request's transaction, and the worker binary. With `DATABASE_URL` set:
//! `cargo run --example minimal -- migrate`, then `-- sign-up a@example.com`
//! and `-- work` (Ctrl-C to stop).

use diesel::prelude::*;
use jobqueue::prelude::*;
use serde::{Deserialize, Serialize};

#[derive(Serialize, Deserialize, Job)]
#[job(type = "email.welcome", queue = "mail")]
struct Welcome {
    to: String,
}

impl Perform for Welcome {
    fn perform(&self, _ctx: &mut JobContext<'_>) -> Result<(), JobError> {
        println!("welcome mail to {}", self.to);
        Ok(())
    }
}

/// A web request: its own writes and the job commit together, or neither.
fn sign_up(conn: &mut PgConnection, email: &str) -> Result<(), jobqueue::Error> {
    conn.transaction(|conn| Welcome { to: email.into() }.enqueue(conn).map(drop))
}

fn main() -> Result<std::process::ExitCode, Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    if let [_, command, email] = args.as_slice()
        && command == "sign-up"
    {
        let mut conn = PgConnection::establish(&std::env::var("DATABASE_URL")?)?;
        sign_up(&mut conn, email)?;
        return Ok(std::process::ExitCode::SUCCESS);
    }
    Ok(jobqueue::Cli::new().register::<Welcome>().main())
}
