//! The runner's vacuum of the jobs table, on a queue session: the dead
//! row versions every claim and completion leaves behind, counted before
//! and after.

use diesel::RunQueryDsl;

use crate::{Result, sql};

/// What one vacuum of the jobs table did ([`QueueSession::vacuum_if_needed`](crate::session::QueueSession::vacuum_if_needed)).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Vacuumed {
    /// Dead row versions before it.
    pub dead_before: i64,
    /// Dead row versions it could not remove.
    pub dead_after: i64,
}

impl Vacuumed {
    /// Dead row versions it removed, as far as the statistics tell (rows
    /// that died while it ran count against it; never below 0).
    pub fn removed(&self) -> i64 {
        (self.dead_before - self.dead_after).max(0)
    }

    /// Whether it removed less than half of the dead row versions: the
    /// xmin horizon is held back, and vacuuming again achieves nothing
    /// until it moves.
    pub fn reclaimed_little(&self) -> bool {
        self.dead_after.saturating_mul(2) > self.dead_before
    }
}

impl crate::session::QueueSession {
    /// Vacuums the jobs table if it holds at least `min_dead` dead row
    /// versions (and no other session is vacuuming it); returns the dead
    /// row versions before and after when it did. Every claim and completion
    /// leaves a dead version behind, and until they are vacuumed the claim's
    /// index scan steps over their entries; autovacuum visits a table at
    /// most once a minute. Versions a vacuum cannot remove (a transaction,
    /// replication slot or prepared transaction still holds the xmin horizon
    /// from before they died) are still counted after it.
    ///
    /// With `truncate`, the vacuum also shortens the table by the empty
    /// pages at its end, which takes an `ACCESS EXCLUSIVE` lock: every
    /// claim and completion waits behind it, for up to about 20 ms. Without,
    /// the empty pages stay and take new rows.
    pub fn vacuum_if_needed(&mut self, min_dead: i64, truncate: bool) -> Result<Option<Vacuumed>> {
        let dead_before = self.dead_row_versions()?;
        if dead_before < min_dead {
            return Ok(None);
        }
        let vacuum = if truncate {
            sql::JOB_VACUUM_TRUNCATE
        } else {
            sql::JOB_VACUUM
        };
        diesel::sql_query(vacuum).execute(self.conn())?;
        let dead_after = self.dead_row_versions()?;
        Ok(Some(Vacuumed {
            dead_before,
            dead_after,
        }))
    }

    /// Dead row versions of the jobs table, as the statistics count them.
    fn dead_row_versions(&mut self) -> Result<i64> {
        #[derive(diesel::QueryableByName)]
        struct Dead {
            #[diesel(sql_type = diesel::sql_types::BigInt)]
            dead: i64,
        }
        Ok(diesel::sql_query(sql::JOB_DEAD_TUPLES)
            .get_result::<Dead>(self.conn())?
            .dead)
    }
}
