//! Running the batch statements on held jobs that are fenced by the
//! lease tokens: `(ids, tokens, ...) -> RETURNING id`, what each changed
//! sorted from what it left alone (a job recovered meanwhile).

use diesel::prelude::*;
use diesel::sql_types::{Array, Integer, Uuid};

use crate::id_rows::IdRow;
use crate::isolation::{Scope, scoped};
use crate::lease::{Fenced, Lease, columns};
use crate::prepared::{Prepared, Statement, prepared};
use crate::{Error, Result, sql};

/// One of the `(ids, tokens) -> RETURNING id` statements, bound to
/// `leases` (sorted by id).
pub(crate) fn fenced_query<S: Statement>(leases: &[Lease]) -> Prepared<'static, S> {
    let (ids, tokens) = columns(leases);
    prepared::<S>()
        .bind::<Array<Uuid>, _>(ids)
        .bind::<Array<Integer>, _>(tokens)
}

/// Runs a bound `(ids, tokens, ...) -> RETURNING id` statement on `leases`.
pub(crate) fn run_fenced<S: Statement>(
    conn: &mut PgConnection,
    scope: Scope,
    leases: &[Lease],
    query: Prepared<'_, S>,
) -> Result<Fenced> {
    if leases.is_empty() {
        return Ok(Fenced::default());
    }
    let rows = scoped(conn, scope, sql::HOT_PATH_BEGIN, |conn| {
        Ok(query.load::<IdRow>(conn)?)
    })?;
    Ok(Fenced::sort(
        leases,
        rows.into_iter().map(|row| row.id).collect(),
    ))
}

/// Runs one of the `(ids, tokens) -> RETURNING id` statements.
pub(crate) fn fenced_update<S: Statement>(
    conn: &mut PgConnection,
    scope: Scope,
    leases: &[Lease],
) -> Result<Fenced> {
    run_fenced(conn, scope, leases, fenced_query::<S>(leases))
}

/// `Ok` if the statement changed `lease`'s job, else
/// [`Error::LeaseLost`]: the one-job form of a fenced statement.
pub(crate) fn single(lease: &Lease, fenced: Fenced) -> Result<()> {
    if fenced.applied.contains(&lease.job_id) {
        Ok(())
    } else {
        Err(Error::LeaseLost {
            job_id: lease.job_id,
            token: lease.token,
        })
    }
}
