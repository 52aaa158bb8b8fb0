//! Claims of waiting keyed jobs straight from their keys' lines: what an
//! admission (`waiting` to `pending`, see `admission.rs`) followed by a
//! claim does, with one write per job instead of two.
//!
//! A runner with room claims so the heads of the lines no admission
//! looked at yet, and the jobs behind them up to their key's room, of the
//! queues that allow it (a key limit without order, nothing else the
//! claim statement checks: see `claims_waiting!` in `sql/keys.rs`). What
//! it leaves (other queues, other job types, more than it asked for) is
//! admitted as before. The statements are in `sql/keys.rs`.

use diesel::prelude::*;
use diesel::sql_types::{Array, BigInt, Double, Text, Uuid};

use crate::admission::QueueKey;
use crate::claim::Claim;
use crate::isolation::read_committed;
use crate::prepared::prepared;
use crate::{JobId, JobRow, Result, sql};

#[derive(QueryableByName)]
struct Head {
    #[diesel(sql_type = Uuid)]
    id: JobId,
    #[diesel(embed)]
    key: QueueKey,
}

/// Claims up to `claim.limit` due waiting jobs of `claim`'s queues
/// straight from their keys' lines, fleet-wide never more of a key at once
/// than its queue's key limit: each is `claimed` as [`crate::claim`]
/// claims (an attempt used, a new fencing token, `claim.lease`). Queues
/// named in `claim.queue_limits` (capped for this claim) are left out, and
/// so are lines headed by a job of a type not in `claim.handled_types`
/// (when not empty): they are admitted instead. Jobs of such types behind
/// a head it claims, within their key's room, are admitted to `pending`
/// by the same statement (and their queues woken). Keys are taken in the order their heads came
/// due; priorities are not compared. Returns the claimed rows in id order
/// (enqueue order); none, after one read, when nothing waits.
pub fn claim_waiting(conn: &mut PgConnection, claim: &Claim) -> Result<Vec<JobRow>> {
    claim.validate()?;
    let capped: Vec<&str> = claim.queue_limits.iter().map(|(q, _)| q.as_str()).collect();
    let heads = prepared::<sql::KeyClaimHeads>()
        .bind::<Array<Text>, _>(&claim.queues)
        .bind::<Array<Text>, _>(&capped)
        .bind::<Array<Text>, _>(&claim.handled_types)
        .bind::<BigInt, _>(claim.limit)
        .load::<Head>(conn)?;
    if heads.is_empty() {
        return Ok(Vec::new());
    }
    let ids: Vec<JobId> = heads.iter().map(|h| h.id).collect();
    let queues: Vec<&str> = heads.iter().map(|h| h.key.queue.as_str()).collect();
    let keys: Vec<&str> = heads.iter().map(|h| h.key.key.as_str()).collect();
    let mut rows = read_committed(conn, |conn| {
        prepared::<sql::KeyLockQueues>()
            .bind::<Array<Text>, _>(&queues)
            .execute(conn)?;
        Ok(prepared::<sql::KeyClaim>()
            .bind::<Array<Uuid>, _>(&ids)
            .bind::<Array<Text>, _>(&queues)
            .bind::<Array<Text>, _>(&keys)
            .bind::<BigInt, _>(claim.limit)
            .bind::<Text, _>(&claim.worker_id)
            .bind::<Double, _>(claim.lease.as_secs_f64())
            .bind::<Array<Text>, _>(&claim.handled_types)
            .bind::<Text, _>(crate::enqueue::NOTIFY_CHANNEL)
            .load::<JobRow>(conn)?)
    })?;
    // UPDATE ... RETURNING keeps no order.
    rows.sort_by_key(|row| row.id);
    Ok(rows)
}
