//! The indexes of live jobs against the size they would have packed, and
//! their rebuild without blocking the queue.
//!
//! While something holds the xmin horizon (see `engine::xmin_horizon`),
//! every job claimed leaves the entry of its `pending` version in the claim
//! index, and nothing can remove it; the index grows by one entry per job
//! for as long as the pin lasts. Once the horizon moves on, vacuum removes
//! the entries and frees the pages, but a B-tree gives no page back to the
//! file system: the index keeps the size the pin gave it (59 MB after 200 s
//! at 5,000 jobs/s), its live entries scattered over it, until a `REINDEX`.
//! The indexes of the other live states (held, scheduled, set aside) grow
//! the same way.
//!
//! The packed size is estimated, not measured (`pgstattuple` would measure
//! it, but it is an extension): the index's entries by the planner's count
//! (`pg_class.reltuples`, which the last vacuum, analyze or build of the
//! index set), times the bytes of an entry (an 8-byte tuple header and the
//! key, its fixed-length columns at their length and the others at their
//! average width by the table's statistics, rounded up to 8 bytes, and a
//! 4-byte line pointer), packed into leaf pages filled to 90 % (B-tree's
//! default fill factor, which a rebuild packs to), plus one level of inner
//! pages above more than one leaf, and the metapage. Alignment inside the key and B-tree's
//! deduplication of equal keys are left out: the estimate is a little
//! above the size a rebuild gives, never far below it.

use diesel::prelude::*;
use diesel::sql_types::{Array, BigInt, Bool, Double, Integer, Text};

use crate::{Result, sql};

/// The indexes of live jobs, which grow while the horizon is held: the
/// claim's (`pending`), then those of held, scheduled and set-aside jobs.
pub const LIVE_JOB_INDEXES: [&str; 4] = [
    "jobqueue_jobs_fetch_idx",
    "jobqueue_jobs_lease_idx",
    "jobqueue_jobs_scheduled_idx",
    "jobqueue_jobs_unhandled_idx",
];

/// A B-tree page's own bytes: its header (24) and B-tree's special space (16).
const PAGE_OVERHEAD: i64 = 40;

/// How full a rebuild packs the leaf pages (B-tree's default fill factor).
const LEAF_FILL: f64 = 0.90;

/// One index's size on disk against its estimated packed size
/// ([`index_sizes`]).
#[derive(Debug, Clone, PartialEq)]
pub struct IndexSize {
    /// The index's name.
    pub name: String,
    /// Its size on disk, bytes.
    pub bytes: i64,
    /// Its entries by the planner's count (`None`: never counted: no
    /// vacuum, analyze or build since it was created empty).
    pub entries: Option<f64>,
    /// Whether it is valid (an interrupted concurrent build leaves an
    /// invalid one).
    pub valid: bool,
    /// The bytes an entry takes in a packed leaf page, line pointer
    /// included.
    pub entry_bytes: i64,
    /// The size it would have packed with its entries (see the module's
    /// documentation); `None` when its entries were never counted.
    pub packed_bytes: Option<i64>,
    /// The statement that rebuilds it concurrently.
    rebuild: String,
}

impl IndexSize {
    /// How many times its packed size it is (`None`: not estimated).
    pub fn bloat(&self) -> Option<f64> {
        self.packed_bytes
            .map(|packed| self.bytes as f64 / packed.max(1) as f64)
    }
}

#[derive(QueryableByName)]
struct SizeRow {
    #[diesel(sql_type = Text)]
    name: String,
    #[diesel(sql_type = BigInt)]
    bytes: i64,
    #[diesel(sql_type = Double)]
    entries: f64,
    #[diesel(sql_type = Bool)]
    valid: bool,
    #[diesel(sql_type = BigInt)]
    key_bytes: i64,
    #[diesel(sql_type = BigInt)]
    block_bytes: i64,
    #[diesel(sql_type = Text)]
    rebuild: String,
}

/// The bytes of one entry of a key `key_bytes` wide in a leaf page.
fn entry_bytes(key_bytes: i64) -> i64 {
    let tuple = 8 + key_bytes.max(0);
    (tuple + 7) / 8 * 8 + 4
}

/// The size `entries` entries of `entry` bytes pack into, in pages of
/// `block` bytes.
fn packed_bytes(entries: f64, entry: i64, block: i64) -> i64 {
    let per_page = ((block - PAGE_OVERHEAD) as f64 * LEAF_FILL / entry as f64)
        .floor()
        .max(1.0);
    let leaves = (entries.max(0.0) / per_page).ceil().max(1.0);
    // A single leaf is the root; more need a level above.
    let inner = if leaves > 1.0 {
        (leaves / per_page).ceil()
    } else {
        0.0
    };
    ((leaves + inner + 1.0) * block as f64) as i64
}

/// The indexes named `names` that exist, in that order, each with its size
/// on disk and its estimated packed size (see the module's documentation).
/// Reads the catalogs and the table's statistics only.
pub fn index_sizes(conn: &mut PgConnection, names: &[&str]) -> Result<Vec<IndexSize>> {
    let rows = diesel::sql_query(sql::JOB_INDEX_SIZES)
        .bind::<Array<Text>, _>(names)
        .load::<SizeRow>(conn)?;
    Ok(rows
        .into_iter()
        .map(|row| {
            let entry = entry_bytes(row.key_bytes);
            let entries = (row.entries >= 0.0).then_some(row.entries);
            IndexSize {
                packed_bytes: entries.map(|n| packed_bytes(n, entry, row.block_bytes)),
                name: row.name,
                bytes: row.bytes,
                entries,
                valid: row.valid,
                entry_bytes: entry,
                rebuild: row.rebuild,
            }
        })
        .collect())
}

/// Rebuilds `index` with `REINDEX INDEX CONCURRENTLY`: claims, completions
/// and enqueues go on meanwhile; it waits for the transactions that were
/// open when it began. Runs outside any transaction (call it on a
/// connection in none), waiting at most 10 s for a lock and running at
/// most 30 minutes; the session's own limits are put back after. A rebuild
/// that fails or is cancelled leaves an invalid copy behind, which
/// [`drop_rebuild_leftovers`] drops. Needs PostgreSQL 12 or later, and to
/// be the index's owner.
pub fn rebuild_index(conn: &mut PgConnection, index: &IndexSize) -> Result<()> {
    use diesel::connection::SimpleConnection;
    conn.batch_execute(sql::JOB_INDEX_REBUILD_LIMITS)?;
    let rebuilt = conn.batch_execute(&index.rebuild);
    let reset = conn.batch_execute(sql::JOB_INDEX_REBUILD_UNLIMIT);
    rebuilt?;
    Ok(reset?)
}

#[derive(QueryableByName)]
struct Leftover {
    #[diesel(sql_type = Text)]
    name: String,
    #[diesel(sql_type = Text)]
    statement: String,
}

/// Drops what interrupted rebuilds of the jobs table's indexes left behind
/// (invalid `<index>_ccnew` and `<index>_ccold` indexes, which every write
/// still maintains), unless an index of the table is being built now;
/// returns their names. Each `DROP INDEX CONCURRENTLY` runs outside any
/// transaction, with the limits of [`rebuild_index`].
pub fn drop_rebuild_leftovers(conn: &mut PgConnection) -> Result<Vec<String>> {
    use diesel::connection::SimpleConnection;
    let leftovers = diesel::sql_query(sql::JOB_INDEX_LEFTOVERS).load::<Leftover>(conn)?;
    if leftovers.is_empty() {
        return Ok(Vec::new());
    }
    conn.batch_execute(sql::JOB_INDEX_REBUILD_LIMITS)?;
    let dropped: Result<Vec<String>> = leftovers
        .into_iter()
        .map(|leftover| {
            conn.batch_execute(&leftover.statement)?;
            Ok(leftover.name)
        })
        .collect();
    let reset = conn.batch_execute(sql::JOB_INDEX_REBUILD_UNLIMIT);
    let dropped = dropped?;
    reset?;
    Ok(dropped)
}

#[derive(QueryableByName)]
struct Locked {
    #[diesel(sql_type = Bool)]
    locked: bool,
}

/// Takes, for this session until [`unlock_index_upkeep`], the advisory lock
/// that lets one runner at a time rebuild the jobs table's indexes; false
/// if another session holds it.
pub fn try_lock_index_upkeep(conn: &mut PgConnection) -> Result<bool> {
    Ok(diesel::sql_query(sql::JOB_INDEX_UPKEEP_LOCK)
        .get_result::<Locked>(conn)?
        .locked)
}

/// Releases the lock [`try_lock_index_upkeep`] took.
pub fn unlock_index_upkeep(conn: &mut PgConnection) -> Result<()> {
    diesel::sql_query(sql::JOB_INDEX_UPKEEP_UNLOCK).get_result::<Locked>(conn)?;
    Ok(())
}

#[derive(QueryableByName)]
struct Sent {
    #[diesel(sql_type = Bool)]
    sent: bool,
}

/// Asks the server to cancel the statement the session of process `pid`
/// runs (a rebuild a stopping runner gives up); true if the signal was
/// sent. `conn` must be of the same role, or a superuser's.
pub fn cancel_backend(conn: &mut PgConnection, pid: i32) -> Result<bool> {
    Ok(diesel::sql_query(sql::SESSION_CANCEL)
        .bind::<Integer, _>(pid)
        .get_result::<Sent>(conn)?
        .sent)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_claim_index_packs_about_140_entries_a_page() {
        // queue (a 7-letter name: 8 bytes), priority 4, run_at 8, id 16.
        let entry = entry_bytes(36);
        assert_eq!(entry, 52);
        // Empty: the root leaf and the metapage.
        assert_eq!(packed_bytes(0.0, entry, 8192), 2 * 8192);
        assert_eq!(packed_bytes(141.0, entry, 8192), 2 * 8192);
        let million = packed_bytes(1e6, entry, 8192);
        let pages = million / 8192;
        // 8,152 × 0.9 / 52 = 141 a page: 7,093 leaves, 51 inner, the metapage.
        assert_eq!(pages, 7093 + 51 + 1);
    }
}
