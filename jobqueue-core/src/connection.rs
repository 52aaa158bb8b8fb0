//! What a worker runs on a new connection, and to check one: whether the
//! server takes writes, the setup of a connection dedicated to the queue,
//! the server's version, process and TCP ends of the session, and `LISTEN` for the
//! wake-ups of enqueues. A runner (`jobqueue-runner`) makes every one of
//! its connections with these; the statements themselves are with the rest
//! of the SQL (`sql/session.rs`).

use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

use diesel::sql_types::{Integer, Nullable, Text};
use diesel::{PgConnection, QueryableByName, RunQueryDsl};

use crate::{Error, Result, sql};

/// A query whose one row and column is `on` when the server takes no writes
/// (a standby, or `default_transaction_read_only` on), else `off`: for a
/// client other than Diesel (a `LISTEN` connection), as a simple query.
pub const READ_ONLY_QUERY: &str = sql::SESSION_READ_ONLY;

/// `LISTEN` on [`crate::enqueue::NOTIFY_CHANNEL`], where enqueues announce their
/// queue: for a client other than Diesel, as a simple query.
pub const LISTEN: &str = sql::SESSION_LISTEN;

#[derive(QueryableByName)]
struct ReadOnly {
    #[diesel(sql_type = Text)]
    read_only: String,
}

/// Fails with [`Error::ReadOnly`] unless `conn`'s server takes writes.
pub fn check_writable(conn: &mut PgConnection) -> Result<()> {
    let row = diesel::sql_query(sql::SESSION_READ_ONLY).get_result::<ReadOnly>(conn)?;
    writable(&row.read_only)
}

/// Sets up `conn` for a worker's own use, and checks that its server takes
/// writes ([`Error::ReadOnly`] if not), in one round trip: the server ends
/// the session once it sits idle inside a transaction for
/// `idle_in_transaction` (a worker's transactions last milliseconds; one
/// left open by a frozen worker would keep its row locks, and every other
/// worker off its jobs, until it resumes).
pub fn set_up_worker_session(conn: &mut PgConnection, idle_in_transaction: Duration) -> Result<()> {
    let millis = idle_in_transaction.as_millis().max(1);
    let row = diesel::sql_query(sql::SESSION_RUNNER_SETUP)
        .bind::<Text, _>(format!("{millis}ms"))
        .get_result::<ReadOnly>(conn)?;
    writable(&row.read_only)
}

fn writable(read_only: &str) -> Result<()> {
    if read_only == "on" {
        return Err(Error::ReadOnly);
    }
    Ok(())
}

/// The process id of the server process serving `conn`'s session.
pub fn backend_pid(conn: &mut PgConnection) -> Result<i32> {
    int4(conn, sql::SESSION_BACKEND_PID)
}

/// The server's version as a number (`150020` for 15.20).
pub fn server_version(conn: &mut PgConnection) -> Result<i32> {
    int4(conn, sql::SESSION_SERVER_VERSION)
}

/// The number a statement of one `int4` answers (its one row's column `n`).
fn int4(conn: &mut PgConnection, query: &str) -> Result<i32> {
    #[derive(QueryableByName)]
    struct Int4 {
        #[diesel(sql_type = Integer)]
        n: i32,
    }
    Ok(diesel::sql_query(query).get_result::<Int4>(conn)?.n)
}

/// A session's TCP ends, as its server reports them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SessionEnds {
    /// The client's address and port (this process's end, unless a proxy
    /// or a pooler stands between).
    pub client: SocketAddr,
    /// The server's address and port.
    pub server: SocketAddr,
}

/// `conn`'s TCP ends as its server reports them; `None` over a Unix socket.
pub fn session_ends(conn: &mut PgConnection) -> Result<Option<SessionEnds>> {
    #[derive(QueryableByName)]
    struct Ends {
        #[diesel(sql_type = Nullable<Text>)]
        client_addr: Option<String>,
        #[diesel(sql_type = Nullable<Integer>)]
        client_port: Option<i32>,
        #[diesel(sql_type = Nullable<Text>)]
        server_addr: Option<String>,
        #[diesel(sql_type = Nullable<Integer>)]
        server_port: Option<i32>,
    }
    let ends = diesel::sql_query(sql::SESSION_ENDS).get_result::<Ends>(conn)?;
    let end = |addr: Option<String>, port: Option<i32>| -> Option<SocketAddr> {
        let ip: IpAddr = addr?.parse().ok()?;
        Some(SocketAddr::new(ip, u16::try_from(port?).ok()?))
    };
    Ok(end(ends.client_addr, ends.client_port)
        .zip(end(ends.server_addr, ends.server_port))
        .map(|(client, server)| SessionEnds { client, server }))
}

#[cfg(test)]
mod tests {
    #[test]
    fn listen_names_the_channel_enqueues_notify() {
        assert_eq!(
            super::LISTEN,
            format!("LISTEN \"{}\"", crate::enqueue::NOTIFY_CHANNEL)
        );
    }
}
