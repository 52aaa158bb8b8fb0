//! What holds back vacuum: while a transaction, a replication slot or a
//! prepared transaction holds the xmin horizon, VACUUM removes no row
//! version that died after it. Every claim and completion leaves one
//! behind, in the table and in the fetch index, and the claim steps over
//! them until they go.

use diesel::prelude::*;
use diesel::sql_types::{BigInt, Bool, Double, Nullable, Text};

use super::{Check, CheckStatus, DoctorOptions, format, grade, read};
use crate::horizon::{Holder, Horizon, SessionHold};
use crate::{Result, sql};

/// The name of the `vacuum horizon` check.
pub(super) const TRANSACTIONS: &str = "vacuum horizon";

/// The name of the `replication slots` check.
pub(super) const SLOTS: &str = "replication slots";

/// The name of the `prepared xacts` check.
pub(super) const PREPARED: &str = "prepared xacts";

#[derive(QueryableByName)]
struct SeesAll {
    #[diesel(sql_type = Bool)]
    sees_all: bool,
}

/// `vacuum horizon`: what holds this database's xmin horizon back
/// (`engine::xmin_horizon`, the reading runners go by too), graded by how
/// long it has held it (a session's or prepared transaction's age) or, for
/// a holder whose time the reading cannot tell (a replication slot, a WAL
/// sender relaying a standby's feedback), by how many transactions old
/// the horizon is.
pub(super) fn transactions(conn: &mut PgConnection, options: &DoctorOptions) -> Result<Check> {
    let (horizon, sees_all) = read(conn, |conn| {
        let horizon = crate::horizon::xmin_horizon(conn)?;
        let sees_all = diesel::sql_query(sql::DOCTOR_SEES_ALL_SESSIONS)
            .get_result::<SeesAll>(conn)?
            .sees_all;
        Ok((horizon, sees_all))
    })?;
    // Other roles' sessions show no transaction to a role that may not see
    // them: say so, or an ok would claim more than was seen.
    let unseen = if sees_all {
        ""
    } else {
        "; only this role's sessions are visible (a superuser, or a member of \
         pg_read_all_stats, sees all)"
    };
    let Horizon::Pinned(pin) = horizon else {
        return Ok(Check::ok(
            TRANSACTIONS,
            format!(
                "nothing holds the xmin horizon back: no other session of this database has \
                 a transaction or snapshot open, and no prepared transaction or replication \
                 slot holds one{unseen}"
            ),
        ));
    };
    let (status, open) = match pin.held_for {
        Some(held) => (
            grade(held, options.xact_warn, options.xact_fail),
            format!("open {}", crate::human::human_duration(held)),
        ),
        None => (
            grade(
                u64::try_from(pin.xid_age).unwrap_or(0),
                options.slot_warn_xids,
                options.slot_fail_xids,
            ),
            format!("{} transactions old", pin.xid_age),
        ),
    };
    let (mut evidence, advice) = match &pin.holder {
        Holder::Session(session) => {
            let by = if session.by_transaction {
                "its transaction"
            } else {
                "its snapshot"
            };
            let mut evidence = format!("{} holds the xmin horizon by {by}, {open}", pin.holder);
            if status != CheckStatus::Ok && !session.query.is_empty() {
                evidence.push_str(&format!(": {}", format::query(&session.query)));
            }
            (evidence, session_advice(session))
        }
        Holder::PreparedXact { gid, .. } => {
            let gid = format::literal(gid);
            (
                format!("{} holds the xmin horizon, {open}", pin.holder),
                format!(
                    "finish it (see prepared xacts): COMMIT PREPARED {gid} or ROLLBACK \
                     PREPARED {gid}"
                ),
            )
        }
        Holder::ReplicationSlot { .. } => (
            format!("{} holds the xmin horizon, {open}", pin.holder),
            "see replication slots: make its standby keep up, or drop the slot if nothing \
             needs it"
                .to_owned(),
        ),
    };
    evidence.push_str(unseen);
    Ok(Check::graded(TRANSACTIONS, status, evidence, advice))
}

/// What to do about a session that holds the horizon.
fn session_advice(session: &SessionHold) -> String {
    if session.backend_type == "walsender" {
        "a standby's hot_standby_feedback relays the snapshots of its queries: end its long \
         queries, or bound them there with statement_timeout"
            .to_owned()
    } else if session.state.starts_with("idle in transaction") {
        format!(
            "end it: commit or roll back in its client, or SELECT pg_terminate_backend({}); \
             set idle_in_transaction_session_timeout so abandoned ones end by themselves",
            session.pid
        )
    } else {
        format!(
            "a statement running this long keeps every row version that died since it began: \
             cancel it (SELECT pg_cancel_backend({})), run such work on a replica, or bound it \
             with statement_timeout",
            session.pid
        )
    }
}

#[derive(QueryableByName)]
struct Slot {
    #[diesel(sql_type = Text)]
    name: String,
    #[diesel(sql_type = Text)]
    kind: String,
    #[diesel(sql_type = Bool)]
    active: bool,
    #[diesel(sql_type = Nullable<BigInt>)]
    xmin_age: Option<i64>,
    #[diesel(sql_type = Nullable<BigInt>)]
    catalog_xmin_age: Option<i64>,
    #[diesel(sql_type = Nullable<Double>)]
    wal_bytes: Option<f64>,
}

impl Slot {
    /// The age in transactions of the oldest horizon it holds.
    fn age(&self) -> u64 {
        let age = self
            .xmin_age
            .unwrap_or(0)
            .max(self.catalog_xmin_age.unwrap_or(0));
        u64::try_from(age).unwrap_or(0)
    }

    fn status(&self, options: &DoctorOptions) -> CheckStatus {
        let by_age = grade(self.age(), options.slot_warn_xids, options.slot_fail_xids);
        if self.active {
            by_age
        } else {
            by_age.max(CheckStatus::Warn)
        }
    }

    fn describe(&self) -> String {
        let horizon = match (self.xmin_age, self.catalog_xmin_age) {
            (Some(xmin), Some(catalog)) => {
                format!("xmin {xmin} and catalog_xmin {catalog} transactions old")
            }
            (Some(xmin), None) => format!("xmin {xmin} transactions old"),
            (None, Some(catalog)) => format!("catalog_xmin {catalog} transactions old"),
            (None, None) => "no horizon".to_owned(),
        };
        let wal = self
            .wal_bytes
            .map(|b| format!(", keeps {} of WAL", format::bytes(b)))
            .unwrap_or_default();
        format!(
            "slot {} ({}, {}) holds {horizon}{wal}",
            self.name,
            self.kind,
            if self.active { "active" } else { "inactive" }
        )
    }
}

/// `replication slots`: slots that hold an xmin (vacuum of every table)
/// or a catalog_xmin (vacuum of the system catalogs); either keeps its WAL.
pub(super) fn slots(conn: &mut PgConnection, options: &DoctorOptions) -> Result<Check> {
    let slots = read(conn, |conn| {
        Ok(diesel::sql_query(sql::DOCTOR_SLOTS).load::<Slot>(conn)?)
    })?;
    let Some(worst) = slots.iter().max_by_key(|s| (s.status(options), s.age())) else {
        return Ok(Check::ok(SLOTS, "no replication slot holds back vacuum"));
    };
    let status = worst.status(options);
    let mut evidence = worst.describe();
    if slots.len() > 1 {
        evidence.push_str(&format!(
            "; {} more slot(s) hold a horizon",
            slots.len() - 1
        ));
    }
    let drop = format!(
        "SELECT pg_drop_replication_slot({})",
        format::literal(&worst.name)
    );
    let advice = if worst.active {
        format!(
            "its consumer lags: a standby with hot_standby_feedback running long queries, or a \
             logical consumer that does not confirm what it read; make it keep up, or if it is \
             not needed, stop it and {drop}"
        )
    } else {
        format!(
            "nothing reads from it, so its horizon never moves: if its consumer is gone for \
             good, {drop}; otherwise reconnect the consumer"
        )
    };
    Ok(Check::graded(SLOTS, status, evidence, advice))
}

#[derive(QueryableByName)]
struct Prepared {
    #[diesel(sql_type = Text)]
    gid: String,
    #[diesel(sql_type = Text)]
    owner: String,
    #[diesel(sql_type = Double)]
    age_secs: f64,
}

/// `prepared xacts`: prepared transactions of this database, by age (the
/// transaction thresholds apply).
pub(super) fn prepared(conn: &mut PgConnection, options: &DoctorOptions) -> Result<Check> {
    let prepared = read(conn, |conn| {
        Ok(diesel::sql_query(sql::DOCTOR_PREPARED).load::<Prepared>(conn)?)
    })?;
    let Some(oldest) = prepared.first() else {
        return Ok(Check::ok(
            PREPARED,
            "no prepared transaction in this database",
        ));
    };
    let age = format::secs(oldest.age_secs);
    let status = grade(age, options.xact_warn, options.xact_fail);
    let mut evidence = format!(
        "prepared transaction {} {} old (owner {})",
        format::literal(&oldest.gid),
        crate::human::human_duration(age),
        oldest.owner
    );
    if prepared.len() > 1 {
        evidence.push_str(&format!("; {} in this database", prepared.len()));
    }
    let gid = format::literal(&oldest.gid);
    let advice = format!(
        "it holds its locks and the xmin horizon, across restarts, until it is finished: let \
         its transaction manager finish it, or by hand COMMIT PREPARED {gid} or ROLLBACK \
         PREPARED {gid}"
    );
    Ok(Check::graded(PREPARED, status, evidence, advice))
}
