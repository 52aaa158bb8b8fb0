//! Durable steps inside one job: an order is fulfilled in three steps,
//! reserve, charge and ship, each writing the application's own rows
//! through the connection the step is given. Each step's output is
//! recorded on the job's row in the same transaction as its writes, so a
//! retry, a crash or a deploy mid-order resumes at the first step not
//! done: the customer is charged once, whatever happens to the runners.
//! Packing an order's lines is a loop with a durable cursor: each batch
//! of lines and the cursor past it commit together, so a later attempt
//! goes on from the last batch packed.
//!
//! ```sh
//! cargo run --example durable_order -- migrate
//! cargo run --example durable_order -- setup      # the application's tables
//! cargo run --example durable_order -- enqueue order.fulfil '{"order": 7, "fail_shipping_once": true}'
//! cargo run --example durable_order -- enqueue order.pack '{"order": 7, "lines": 1000}'
//! cargo run --example durable_order -- work --queues orders
//! ```
//!
//! Its tests drain an order through a failed first shipment, and a
//! packing that fails half-way, with the testing kit (`DATABASE_URL=postgres://… cargo test --example
//! durable_order`).

use std::process::ExitCode;

use diesel::prelude::*;
use diesel::sql_types::{BigInt, Text};
use jobqueue::Registry;
use jobqueue::prelude::*;
use serde::{Deserialize, Serialize};

/// The application's tables.
const TABLES: &str = "
    CREATE TABLE IF NOT EXISTS reservations (id bigserial PRIMARY KEY, order_id bigint NOT NULL);
    CREATE TABLE IF NOT EXISTS charges (order_id bigint NOT NULL, reservation bigint NOT NULL,
                                        reference text NOT NULL);
    CREATE TABLE IF NOT EXISTS shipments (order_id bigint NOT NULL, charge text NOT NULL);
    CREATE TABLE IF NOT EXISTS packed_lines (order_id bigint NOT NULL, line bigint NOT NULL);";

/// Lines packed in one transaction.
const PACK_BATCH: i64 = 100;

/// Fulfils an order: reserve its stock, charge the customer, ship it.
#[derive(Debug, Serialize, Deserialize, Job)]
#[job(type = "order.fulfil", queue = "orders", max_attempts = 10)]
struct FulfilOrder {
    order: i64,
    /// The carrier refuses the first shipment (to show a retry resume).
    #[serde(default)]
    fail_shipping_once: bool,
}

#[derive(QueryableByName)]
struct Id {
    #[diesel(sql_type = BigInt)]
    id: i64,
}

impl Perform for FulfilOrder {
    fn perform(&self, ctx: &mut JobContext<'_>) -> Result<(), JobError> {
        let order = self.order;
        let first_attempt = ctx.attempt() == 1;
        let reservation: i64 = ctx.step("reserve", |conn| {
            let row =
                diesel::sql_query("INSERT INTO reservations (order_id) VALUES ($1) RETURNING id")
                    .bind::<BigInt, _>(order)
                    .get_result::<Id>(conn)?;
            Ok(row.id)
        })?;
        let charge: String = ctx.step("charge", |conn| {
            // Where an application calls its payment provider, with the
            // reservation as the idempotency key.
            let reference = format!("ch_{order}_{reservation}");
            diesel::sql_query(
                "INSERT INTO charges (order_id, reservation, reference) VALUES ($1, $2, $3)",
            )
            .bind::<BigInt, _>(order)
            .bind::<BigInt, _>(reservation)
            .bind::<Text, _>(&reference)
            .execute(conn)?;
            Ok(reference)
        })?;
        ctx.step("ship", |conn| {
            if self.fail_shipping_once && first_attempt {
                return Err(JobError::retry("the carrier is down"));
            }
            diesel::sql_query("INSERT INTO shipments (order_id, charge) VALUES ($1, $2)")
                .bind::<BigInt, _>(order)
                .bind::<Text, _>(&charge)
                .execute(conn)?;
            Ok(())
        })?;
        // What the checkout page waits for (`jobqueue::wait_result`).
        ctx.set_result(&Fulfilled { charge })
    }
}

/// A fulfilled order, as its job's result.
#[derive(Debug, PartialEq, Serialize, Deserialize)]
struct Fulfilled {
    charge: String,
}

/// Packs an order's lines, a batch at a time.
#[derive(Debug, Serialize, Deserialize, Job)]
#[job(type = "order.pack", queue = "orders", max_attempts = 10)]
struct PackOrder {
    order: i64,
    lines: i64,
    /// The packing station jams at this line on the first attempt (to
    /// show a retry going on from the cursor).
    #[serde(default)]
    jam_at: Option<i64>,
}

impl Perform for PackOrder {
    fn perform(&self, ctx: &mut JobContext<'_>) -> Result<(), JobError> {
        let first_attempt = ctx.attempt() == 1;
        // The lines before the cursor are packed: go on from there.
        let mut next: i64 = ctx.cursor()?.unwrap_or(0);
        while next < self.lines {
            let end = (next + PACK_BATCH).min(self.lines);
            if first_attempt && self.jam_at.is_some_and(|line| (next..end).contains(&line)) {
                return Err(JobError::retry("the packing station jammed"));
            }
            ctx.advance_with(&end, |conn| {
                diesel::sql_query(
                    "INSERT INTO packed_lines (order_id, line)
                     SELECT $1, line FROM generate_series($2, $3 - 1) AS line",
                )
                .bind::<BigInt, _>(self.order)
                .bind::<BigInt, _>(next)
                .bind::<BigInt, _>(end)
                .execute(conn)?;
                Ok(())
            })?;
            next = end;
        }
        Ok(())
    }
}

fn registry() -> Registry {
    Registry::new()
        .register::<FulfilOrder>()
        .register::<PackOrder>()
}

fn main() -> ExitCode {
    if std::env::args().nth(1).as_deref() == Some("setup") {
        let made = std::env::var("DATABASE_URL")
            .map_err(|e| e.to_string())
            .and_then(|url| PgConnection::establish(&url).map_err(|e| e.to_string()))
            .and_then(|mut conn| {
                diesel::connection::SimpleConnection::batch_execute(&mut conn, TABLES)
                    .map_err(|e| e.to_string())
            });
        return match made {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("durable_order setup: {e} (set DATABASE_URL to the database)");
                ExitCode::FAILURE
            }
        };
    }
    jobqueue::Cli::with_registry(registry()).main()
}

#[cfg(test)]
mod tests {
    use chrono::{TimeDelta, Utc};
    use jobqueue::testing::{Drain, Ended, TestDatabase};

    use super::*;

    fn count(conn: &mut PgConnection, table: &str) -> i64 {
        diesel::sql_query(format!("SELECT count(*) AS id FROM {table}"))
            .get_result::<Id>(conn)
            .expect("a count")
            .id
    }

    #[test]
    fn a_failed_shipment_is_retried_without_reserving_or_charging_again() {
        let db = TestDatabase::new().expect("a test database");
        let mut conn = jobqueue::testing::connect(db.url()).expect("a test connection");
        diesel::connection::SimpleConnection::batch_execute(&mut conn, TABLES).expect("tables");
        let id = FulfilOrder {
            order: 7,
            fail_shipping_once: true,
        }
        .enqueue(&mut conn)
        .expect("enqueue")
        .id();
        // Ten minutes on: past the retry's backoff.
        let registry = registry();
        let drained = Drain::new(&registry)
            .as_of(Utc::now() + TimeDelta::minutes(10))
            .recursive(3)
            .run(&mut conn)
            .expect("drain");
        let ended: Vec<&Ended> = drained.jobs.iter().map(|job| &job.ended).collect();
        assert!(
            matches!(ended[..], [Ended::Retried { .. }, Ended::Completed]),
            "{drained}"
        );
        let rows: Vec<i64> = ["reservations", "charges", "shipments"]
            .iter()
            .map(|table| count(&mut conn, table))
            .collect();
        assert_eq!(rows, [1, 1, 1], "reserved, charged and shipped once");
        // Its result, kept for whoever waits for the order.
        let fulfilled = jobqueue::result::<Fulfilled>(&mut conn, id).expect("its result");
        let charge = "ch_7_1".to_owned();
        assert_eq!(
            fulfilled,
            jobqueue::JobResult::Completed(Some(Fulfilled { charge }))
        );
    }

    #[test]
    fn a_jammed_packing_goes_on_from_the_last_batch_packed() {
        let db = TestDatabase::new().expect("a test database");
        let mut conn = jobqueue::testing::connect(db.url()).expect("a test connection");
        diesel::connection::SimpleConnection::batch_execute(&mut conn, TABLES).expect("tables");
        PackOrder {
            order: 7,
            lines: 1_000,
            jam_at: Some(450),
        }
        .enqueue(&mut conn)
        .expect("enqueue");
        let registry = registry();
        let drained = Drain::new(&registry)
            .as_of(Utc::now() + TimeDelta::minutes(10))
            .recursive(3)
            .run(&mut conn)
            .expect("drain");
        let ended: Vec<&Ended> = drained.jobs.iter().map(|job| &job.ended).collect();
        assert!(
            matches!(ended[..], [Ended::Retried { .. }, Ended::Completed]),
            "{drained}"
        );
        let distinct = diesel::sql_query(
            "SELECT count(DISTINCT line) AS id FROM packed_lines WHERE line BETWEEN 0 AND 999",
        )
        .get_result::<Id>(&mut conn)
        .expect("a count")
        .id;
        assert_eq!(
            (count(&mut conn, "packed_lines"), distinct),
            (1_000, 1_000),
            "every line packed once"
        );
    }
}
