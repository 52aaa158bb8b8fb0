//! The xmin horizon: what holds back the vacuum of this database's tables.
//!
//! VACUUM removes only the row versions that died before the oldest
//! transaction id or snapshot still open anywhere that binds this
//! database. While a long report, a stuck client's open transaction, a
//! prepared transaction or a replication slot holds it, every claim and
//! completion leaves a version (and a claim-index entry) nothing can
//! remove. [`xmin_horizon`] reads, in one statement, whether anything
//! holds it and who: the one reading the doctor's `vacuum horizon` check,
//! a runner's vacuum pacing and index upkeep, and its claimer's resume
//! points all go by.

use std::fmt;
use std::time::Duration;

use chrono::{DateTime, Utc};
use diesel::prelude::*;
use diesel::sql_types::{BigInt, Bool, Double, Integer, Nullable, Text, Timestamptz};

use crate::{Result, sql};

/// What holds this database's xmin horizon back, as one reading saw it
/// ([`xmin_horizon`]).
#[derive(Debug, Clone, PartialEq)]
pub enum Horizon {
    /// Nothing but the reading's own session: a vacuum can remove every
    /// row version that died before now.
    Free,
    /// Held back by [`Pin::holder`].
    Pinned(Pin),
}

impl Horizon {
    /// The pin, if pinned.
    pub fn pin(&self) -> Option<&Pin> {
        match self {
            Horizon::Free => None,
            Horizon::Pinned(pin) => Some(pin),
        }
    }

    /// The transaction id the horizon is held at (`None`: free). Two
    /// readings with the same id saw the same pin: the horizon did not move
    /// between them, and a vacuum still removes nothing that died since.
    pub fn xid(&self) -> Option<i64> {
        self.pin().map(|pin| pin.xid)
    }

    /// Whether a pin has held it for at least `at_least` by the database's
    /// clock, or for a time the reading cannot tell (a replication slot, a
    /// WAL sender): a long pin, as opposed to a transaction under way.
    pub fn pinned_for(&self, at_least: Duration) -> bool {
        self.pin()
            .is_some_and(|pin| pin.held_for.is_none_or(|held| held >= at_least))
    }
}

/// What holds the horizon, since when.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct Pin {
    /// Who holds it.
    pub holder: Holder,
    /// The transaction id it is held at, as a number (comparable between
    /// readings, see [`Horizon::xid`]).
    pub xid: i64,
    /// Transactions begun since that id.
    pub xid_age: i64,
    /// When the holding transaction began (a session's) or was prepared,
    /// by the database's clock; `None` for a replication slot or a process
    /// with no transaction, of which the reading cannot tell.
    pub since: Option<DateTime<Utc>>,
    /// How long since `since`, by the database's clock.
    pub held_for: Option<Duration>,
}

/// Who holds the horizon.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Holder {
    /// A session of this database, or a process of none (a WAL sender
    /// relaying a standby's `hot_standby_feedback`).
    Session(SessionHold),
    /// A prepared transaction of this database, left to be committed or
    /// rolled back.
    PreparedXact {
        /// Its global identifier.
        gid: String,
        /// The role that prepared it.
        owner: String,
    },
    /// A replication slot's `xmin` (a physical slot fed back by a standby).
    ReplicationSlot {
        /// The slot's name.
        name: String,
        /// Whether a consumer is connected (its process id).
        active_pid: Option<i32>,
    },
}

/// A session that holds the horizon.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct SessionHold {
    /// Its server process id.
    pub pid: i32,
    /// `client backend`, `walsender`, ... (`pg_stat_activity.backend_type`).
    pub backend_type: String,
    /// Its `application_name` (empty if none).
    pub application_name: String,
    /// The client's address, `local socket`, or empty.
    pub client: String,
    /// `active`, `idle in transaction`, ... (empty if not shown).
    pub state: String,
    /// Its current or last statement (empty if not shown).
    pub query: String,
    /// Whether it holds the horizon by a transaction id of its own (it
    /// wrote, or asked for one), rather than by the snapshot it reads with.
    pub by_transaction: bool,
}

impl fmt::Display for Horizon {
    /// `free`, or `pinned by pid 4242 (report, idle in transaction),
    /// transaction 1234, since 2026-11-28 10:00:03 UTC (5m 02s)`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Horizon::Free => f.write_str("free"),
            Horizon::Pinned(pin) => write!(f, "pinned by {pin}"),
        }
    }
}

impl fmt::Display for Pin {
    /// The holder, the transaction id, and since when.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.holder)?;
        match &self.holder {
            Holder::Session(s) if !s.by_transaction => write!(f, ", its snapshot")?,
            _ => {}
        }
        write!(f, " at transaction {}", self.xid)?;
        match (self.since, self.held_for) {
            (Some(since), Some(held)) => write!(
                f,
                " since {} ({})",
                since.format("%Y-%m-%d %H:%M:%S UTC"),
                crate::human::human_duration(held)
            ),
            _ => write!(f, " ({} transactions ago)", self.xid_age),
        }
    }
}

impl fmt::Display for Holder {
    /// `pid 4242 (report, 10.0.0.7, idle in transaction)`, `prepared
    /// transaction 'x' (owner app)`, `replication slot standby (active)`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Holder::Session(s) => {
                let about: Vec<&str> = [
                    s.application_name.as_str(),
                    s.client.as_str(),
                    s.state.as_str(),
                ]
                .into_iter()
                .filter(|part| !part.is_empty())
                .collect();
                write!(f, "pid {}", s.pid)?;
                if s.backend_type != "client backend" && !s.backend_type.is_empty() {
                    write!(f, " ({})", s.backend_type)?;
                }
                if !about.is_empty() {
                    write!(f, " ({})", about.join(", "))?;
                }
                Ok(())
            }
            Holder::PreparedXact { gid, owner } => {
                write!(f, "prepared transaction '{gid}' (owner {owner})")
            }
            Holder::ReplicationSlot { name, active_pid } => write!(
                f,
                "replication slot {name} ({})",
                if active_pid.is_some() {
                    "active"
                } else {
                    "inactive"
                }
            ),
        }
    }
}

#[derive(QueryableByName)]
struct HolderRow {
    #[diesel(sql_type = Text)]
    kind: String,
    #[diesel(sql_type = BigInt)]
    xid: i64,
    #[diesel(sql_type = BigInt)]
    xid_age: i64,
    #[diesel(sql_type = Bool)]
    by_transaction: bool,
    #[diesel(sql_type = Nullable<Timestamptz>)]
    since: Option<DateTime<Utc>>,
    #[diesel(sql_type = Nullable<Double>)]
    held_secs: Option<f64>,
    #[diesel(sql_type = Nullable<Integer>)]
    pid: Option<i32>,
    #[diesel(sql_type = Nullable<Text>)]
    backend_type: Option<String>,
    #[diesel(sql_type = Text)]
    application_name: String,
    #[diesel(sql_type = Text)]
    client: String,
    #[diesel(sql_type = Text)]
    state: String,
    #[diesel(sql_type = Text)]
    query: String,
    #[diesel(sql_type = Nullable<Text>)]
    name: Option<String>,
    #[diesel(sql_type = Nullable<Text>)]
    owner: Option<String>,
}

impl HolderRow {
    fn into_pin(self) -> Pin {
        let holder = match self.kind.as_str() {
            "prepared" => Holder::PreparedXact {
                gid: self.name.unwrap_or_default(),
                owner: self.owner.unwrap_or_default(),
            },
            "slot" => Holder::ReplicationSlot {
                name: self.name.unwrap_or_default(),
                active_pid: self.pid,
            },
            _ => Holder::Session(SessionHold {
                pid: self.pid.unwrap_or(0),
                backend_type: self.backend_type.unwrap_or_default(),
                application_name: self.application_name,
                client: self.client,
                state: self.state,
                query: self.query,
                by_transaction: self.by_transaction,
            }),
        };
        Pin {
            holder,
            xid: self.xid,
            xid_age: self.xid_age,
            since: self.since,
            held_for: self
                .held_secs
                .and_then(|secs| Duration::try_from_secs_f64(secs).ok()),
        }
    }
}

/// Reads what holds this database's xmin horizon back now (see
/// [`Horizon`]), in one statement on the statistics views and catalogs
/// (`pg_stat_activity`, `pg_prepared_xacts`, `pg_replication_slots`).
/// Needs no privileges; a role that is neither a superuser nor a member of
/// `pg_read_all_stats` sees no other role's sessions hold it. The session
/// reading it does not count.
pub fn xmin_horizon(conn: &mut PgConnection) -> Result<Horizon> {
    Ok(diesel::sql_query(sql::XMIN_HORIZON)
        .get_result::<HolderRow>(conn)
        .optional()?
        .map_or(Horizon::Free, |row| Horizon::Pinned(row.into_pin())))
}

impl crate::session::QueueSession {
    /// `engine::xmin_horizon`: what holds this database's xmin horizon
    /// back now, if anything but this session.
    pub fn xmin_horizon(&mut self) -> Result<Horizon> {
        xmin_horizon(self.conn())
    }
}
