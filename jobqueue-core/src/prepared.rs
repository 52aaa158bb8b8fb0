//! Running the statements of `sql/` as prepared statements.
//!
//! `diesel::sql_query` sends its text to be planned on every execution; the
//! claim's plan alone costs about as much as executing it. A [`Prepared`]
//! statement has a static query id (one marker type per statement), so
//! Diesel prepares it once per connection and only binds and executes it
//! afterwards.

use std::marker::PhantomData;

use diesel::pg::Pg;
use diesel::query_builder::{AstPass, Query, QueryFragment, QueryId};
use diesel::serialize::ToSql;
use diesel::sql_types::{HasSqlType, Untyped};
use diesel::{QueryResult, RunQueryDsl};

/// A statement of `sql/`, named by a marker type.
pub(crate) trait Statement: 'static {
    /// Its text, with parameters `$1`, `$2`, ... (a parameter may repeat).
    const SQL: &'static str;
}

/// Declares marker types for statements of `sql/`.
macro_rules! statements {
    ($($name:ident => $sql:path,)*) => {
        $(
            #[doc = concat!("The `", stringify!($sql), "` statement.")]
            pub(crate) struct $name;
            impl $crate::prepared::Statement for $name {
                const SQL: &'static str = $sql;
            }
        )*
    };
}
pub(crate) use statements;

/// One bound value, of SQL type `ST`.
trait PushBind {
    fn push<'b>(&'b self, out: &mut AstPass<'_, 'b, Pg>) -> QueryResult<()>;
}

struct Bound<ST, U> {
    value: U,
    sql_type: PhantomData<fn() -> ST>,
}

impl<ST, U> PushBind for Bound<ST, U>
where
    Pg: HasSqlType<ST>,
    U: ToSql<ST, Pg>,
{
    fn push<'b>(&'b self, out: &mut AstPass<'_, 'b, Pg>) -> QueryResult<()> {
        out.push_bind_param::<ST, U>(&self.value)
    }
}

/// Statement `S` with its parameters bound, ready to run.
pub(crate) struct Prepared<'a, S> {
    binds: Vec<Box<dyn PushBind + Send + 'a>>,
    statement: PhantomData<S>,
    /// Whether the connection keeps the statement prepared (see
    /// [`Prepared::planned_each_time`]).
    kept: bool,
}

/// Starts binding the parameters of statement `S`.
pub(crate) fn prepared<'a, S: Statement>() -> Prepared<'a, S> {
    Prepared {
        binds: Vec::new(),
        statement: PhantomData,
        kept: true,
    }
}

impl<'a, S: Statement> Prepared<'a, S> {
    /// Planned for its parameters and the table as they are at each run,
    /// never kept prepared: for a statement whose good plan depends on how
    /// large a table has grown since the connection first ran it (a plan
    /// kept from a nearly empty table may read the whole table for each
    /// row it looks up).
    pub(crate) fn planned_each_time(mut self) -> Self {
        self.kept = false;
        self
    }

    /// Binds the next parameter (`$1` first) as SQL type `ST`.
    pub(crate) fn bind<ST: 'a, U>(mut self, value: U) -> Self
    where
        Pg: HasSqlType<ST>,
        U: ToSql<ST, Pg> + Send + 'a,
    {
        self.binds.push(Box::new(Bound {
            value,
            sql_type: PhantomData,
        }));
        self
    }
}

impl<S: Statement> QueryFragment<Pg> for Prepared<'_, S> {
    fn walk_ast<'b>(&'b self, mut out: AstPass<'_, 'b, Pg>) -> QueryResult<()> {
        if !self.kept {
            out.unsafe_to_cache_prepared();
        }
        // Each `$N` in the text becomes a placeholder Diesel numbers itself,
        // bound to the N-th value: a repeated parameter is bound again.
        let sql = S::SQL;
        let bytes = sql.as_bytes();
        let mut start = 0;
        let mut i = 0;
        while i < bytes.len() {
            if bytes[i] == b'$' {
                let digits = bytes[i + 1..]
                    .iter()
                    .take_while(|b| b.is_ascii_digit())
                    .count();
                if digits > 0 {
                    let n: usize = sql[i + 1..i + 1 + digits].parse().unwrap_or(0);
                    let Some(bind) = n.checked_sub(1).and_then(|k| self.binds.get(k)) else {
                        return Err(diesel::result::Error::QueryBuilderError(
                            format!("statement parameter ${n} has no bound value").into(),
                        ));
                    };
                    out.push_sql(&sql[start..i]);
                    bind.push(&mut out)?;
                    i += 1 + digits;
                    start = i;
                    continue;
                }
            }
            i += 1;
        }
        out.push_sql(&sql[start..]);
        Ok(())
    }
}

impl<S: Statement> QueryId for Prepared<'_, S> {
    type QueryId = S;
    const HAS_STATIC_QUERY_ID: bool = true;
}

impl<S: Statement> Query for Prepared<'_, S> {
    type SqlType = Untyped;
}

impl<S: Statement, Conn> RunQueryDsl<Conn> for Prepared<'_, S> {}

/// What runs a statement under `EXPLAIN ANALYZE`, its plan as JSON.
pub(crate) const EXPLAIN_ANALYZE: &str = "EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) ";

/// `EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON)` of a bound statement: planned afresh
/// each time (no static query id), so it shows the plan the statement's
/// parameters get now.
pub(crate) struct ExplainAnalyze<'q, 'a, S>(pub(crate) &'q Prepared<'a, S>);

impl<S: Statement> QueryFragment<Pg> for ExplainAnalyze<'_, '_, S> {
    fn walk_ast<'b>(&'b self, mut out: AstPass<'_, 'b, Pg>) -> QueryResult<()> {
        out.push_sql(EXPLAIN_ANALYZE);
        self.0.walk_ast(out)
    }
}

impl<S: Statement> QueryId for ExplainAnalyze<'_, '_, S> {
    type QueryId = ();
    const HAS_STATIC_QUERY_ID: bool = false;
}

impl<S: Statement> Query for ExplainAnalyze<'_, '_, S> {
    type SqlType = Untyped;
}

impl<S: Statement, Conn> RunQueryDsl<Conn> for ExplainAnalyze<'_, '_, S> {}
