//! The server as a whole: its `LISTEN`/`NOTIFY` queue, which every
//! enqueue writes to, and its connections.

use diesel::prelude::*;
use diesel::sql_types::{BigInt, Double};

use super::{Check, DoctorOptions, format, grade, read};
use crate::{Result, sql};

/// The name of the `notify queue` check.
pub(super) const NOTIFY_QUEUE: &str = "notify queue";

/// The name of the `connections` check.
pub(super) const CONNECTIONS: &str = "connections";

#[derive(QueryableByName)]
struct Usage {
    #[diesel(sql_type = Double)]
    usage: f64,
}

/// `notify queue`: how full the server's notification queue is. It holds
/// every notification until each session listening has read it, so one
/// listener that stops reading fills it; once full, every transaction
/// that notifies (enqueues among them) fails at commit.
pub(super) fn notify_queue(conn: &mut PgConnection, options: &DoctorOptions) -> Result<Check> {
    let usage = read(conn, |conn| {
        Ok(diesel::sql_query(sql::DOCTOR_NOTIFY_USAGE)
            .get_result::<Usage>(conn)?
            .usage)
    })?;
    Ok(Check::graded(
        NOTIFY_QUEUE,
        grade(usage, options.notify_warn, options.notify_fail),
        format!("LISTEN/NOTIFY queue {} full", format::percent(usage)),
        "a listening session does not read its notifications: one idle in a transaction (see \
         vacuum horizon), or one whose client stopped reading; end it (SELECT \
         pg_terminate_backend(pid)). When the queue is full, every enqueue that notifies fails",
    ))
}

#[derive(QueryableByName)]
struct Connections {
    #[diesel(sql_type = BigInt)]
    used: i64,
    #[diesel(sql_type = BigInt)]
    max_connections: i64,
    #[diesel(sql_type = BigInt)]
    superuser_reserved: i64,
    #[diesel(sql_type = BigInt)]
    reserved: i64,
}

/// `connections`: client connections in use against those open to
/// non-superusers (`max_connections` less the reserved ones).
pub(super) fn connections(conn: &mut PgConnection, options: &DoctorOptions) -> Result<Check> {
    let c = read(conn, |conn| {
        Ok(diesel::sql_query(sql::DOCTOR_CONNECTIONS).get_result::<Connections>(conn)?)
    })?;
    let reserved = c.superuser_reserved + c.reserved;
    let open = (c.max_connections - reserved).max(1);
    let fraction = c.used as f64 / open as f64;
    Ok(Check::graded(
        CONNECTIONS,
        grade(fraction, options.connections_warn, options.connections_fail),
        format!(
            "{} of {open} connections in use ({}; max_connections {}, {reserved} reserved)",
            c.used,
            format::percent(fraction),
            c.max_connections
        ),
        "when they run out, runners and the application cannot connect: put a pooler in front \
         (PgBouncer in transaction mode), shrink the runners' and the application's \
         connection pools, or raise max_connections",
    ))
}
