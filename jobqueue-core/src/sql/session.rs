//! What opens a queue statement's transaction, and what sets up and checks
//! a session: the isolation level (READ COMMITTED, whatever the database's
//! default; see `isolation.rs` for why) and the planner settings of the
//! hot-path statements, sent as one batch ahead of a transaction's
//! statements (the `*_BEGIN`) or once per queue session
//! ([`SESSION_SETUP`], `QueueSession`); and what a worker's new
//! connection sets and probes (`SESSION_*`, run by `connection.rs`): its
//! idle-in-transaction limit, whether the server takes writes, its server
//! process and TCP ends, `LISTEN`; the server's version and clock, and the cancel
//! of another session's statement. No table. `doctor.rs` has the doctor's
//! own limits (`DOCTOR_LIMITS`).

/// Opening of a queue statement's own transaction.
pub(crate) const READ_COMMITTED_BEGIN: &str = "BEGIN ISOLATION LEVEL READ COMMITTED";

/// Planner settings of the hot-path statements (claim, and the batch writes
/// on held jobs), as `SET` commands with `{scope}` for `SESSION` or `LOCAL`.
///
/// A queue table's statistics are stale as a rule: a bulk load since the
/// last ANALYZE, a backlog claimed since, a TRUNCATE. With them the planner
/// may sort every pending row to return the first few (a bitmap scan), or
/// drive a batch UPDATE from another index and probe the whole id array for
/// every row it finds (measured: 6 s per batch of 1,000 with 47,000 jobs
/// held). Ruled out here are the plans whose cost grows with the table or
/// with rows other than the statement's own: sorts, bitmap scans, sequential
/// scans, hash and merge joins. What is left is an ordered scan of the
/// fetch index for the claim, and for a batch write one scan of the
/// primary key for `id = ANY(<the batch's ids>)` (each id's token found in
/// its array by `width_bucket`, a binary search: no join at all): its cost
/// is the batch's size, in id order (see `lease::columns`), whatever the
/// statistics say, with custom and generic plans alike.
/// `tests/it/plans.rs` checks both in every table state.
///
/// JIT compilation is off as well. A plan that keeps a ruled-out node
/// because nothing else can do (the sequential scan of a small table with
/// no index on the column asked about, the sort of the horizon look) costs
/// over 10^10, far past `jit_above_cost`, so the server compiled every
/// execution of it with inlining and optimisation: 20 to 100 ms for the
/// one-row check of queue limits the fetcher makes every poll interval,
/// 670 ms for maintenance's horizon look, each stalling the thread that
/// asked (`jobqueue bench --only soak`, server log with `auto_explain`).
/// No statement of the queue's runs long enough to repay a compilation.
macro_rules! planner_settings {
    ($scope:literal) => {
        concat!(
            "SET ",
            $scope,
            " enable_bitmapscan = off; ",
            "SET ",
            $scope,
            " enable_sort = off; ",
            "SET ",
            $scope,
            " enable_seqscan = off; ",
            "SET ",
            $scope,
            " enable_hashjoin = off; ",
            "SET ",
            $scope,
            " enable_mergejoin = off; ",
            "SET ",
            $scope,
            " jit = off"
        )
    };
}

/// Session settings of a `QueueSession`: what [`HOT_PATH_BEGIN`] sets
/// per transaction, set once for the session.
pub(crate) const SESSION_SETUP: &str = concat!(
    "SET SESSION CHARACTERISTICS AS TRANSACTION ISOLATION LEVEL READ COMMITTED; ",
    planner_settings!("SESSION")
);

/// Opening of a report's transaction (stats, the queue list and gauges, the
/// doctor): READ COMMITTED, without JIT compilation. A report aggregates the
/// live jobs at most, and with a large backlog the planner's cost estimate
/// crosses the JIT threshold: compiling took about 40 ms of an 80 ms count
/// at 100,000 due jobs (`jobqueue bench --only scale`).
pub(crate) const REPORT_BEGIN: &str = "BEGIN ISOLATION LEVEL READ COMMITTED; SET LOCAL jit = off";

/// Opening of a hot-path statement's own transaction (claim, batch writes on
/// held jobs): READ COMMITTED, and the planner settings above for this
/// transaction only.
pub(crate) const HOT_PATH_BEGIN: &str = concat!(
    "BEGIN ISOLATION LEVEL READ COMMITTED; ",
    planner_settings!("LOCAL")
);

/// Turns JIT compilation off until the end of the transaction, or until
/// [`JIT_RESTORE`] of the row's `prior` (the session's setting before):
/// around a statement of an enqueue that runs in the caller's transaction
/// and whose cost estimate grows with its batch (the room of thousands of
/// keys, `KEY_ROOM_FOR_INSERT`), which the server would otherwise compile
/// at each run. Measured: 300 ms of JIT compilation for a look-up of
/// 10,000 keys that runs in 35 ms (`jobqueue bench --only keys`, server
/// log). The setting is read before it is changed: the lateral reads
/// `p.prior`, so it runs after it.
pub(crate) const JIT_OFF_LOCAL: &str = "
    SELECT p.prior
    FROM (SELECT current_setting('jit') AS prior OFFSET 0) AS p
    CROSS JOIN LATERAL (SELECT set_config('jit', 'off', true) AS now
                        WHERE p.prior IS NOT NULL) AS s";

/// Sets JIT compilation back to `$1` (what [`JIT_OFF_LOCAL`] read) for the
/// rest of the transaction.
pub(crate) const JIT_RESTORE: &str = "SELECT set_config('jit', $1, true) AS prior";

/// What a runner thread's new connection sets and checks, in one round trip:
/// `$1` the longest it may sit idle inside a transaction
/// (`idle_in_transaction_session_timeout`, as the server reads it: `5s`), set
/// for the session; rows of `setting` (the value set) and `read_only`
/// (`on` when the server takes no writes).
pub(crate) const SESSION_RUNNER_SETUP: &str =
    "SELECT set_config('idle_in_transaction_session_timeout', $1, false) AS setting,
            current_setting('transaction_read_only') AS read_only";

/// Whether the server takes writes: `on` when it does not (a standby, or
/// `default_transaction_read_only` on, as failover tools fence a demoted
/// primary), else `off`. A row of `read_only`; also sent as a simple query
/// (the listener's), whose one column is the same.
pub(crate) const SESSION_READ_ONLY: &str =
    "SELECT current_setting('transaction_read_only') AS read_only";

/// The server process serving this session: a row of `n`.
pub(crate) const SESSION_BACKEND_PID: &str = "SELECT pg_backend_pid() AS n";

/// The session's TCP ends as the server sees them: a row of `client_addr`,
/// `client_port`, `server_addr`, `server_port` (NULL over a Unix socket).
pub(crate) const SESSION_ENDS: &str =
    "SELECT host(inet_client_addr()) AS client_addr, inet_client_port() AS client_port,
            host(inet_server_addr()) AS server_addr, inet_server_port() AS server_port";

/// Whether the session still answers.
pub(crate) const SESSION_ALIVE: &str = "SELECT 1";

/// Subscribes the session to the wake-ups of enqueues
/// (`NOTIFY_CHANNEL`). Listening again on a channel is a no-op.
pub(crate) const SESSION_LISTEN: &str = "LISTEN \"jobqueue_jobs\"";

/// The database's clock at this moment (not the transaction's start, which
/// `now()` gives): a row of `now`.
pub(crate) const SESSION_CLOCK: &str = "SELECT clock_timestamp() AS now";

/// The server's version as a number (`150020` for 15.20): a row of `n`.
pub(crate) const SESSION_SERVER_VERSION: &str =
    "SELECT current_setting('server_version_num')::int4 AS n";

/// Asks the server to cancel the statement session `$1` runs (a session of
/// the same role, or any for a superuser); true if the signal was sent.
pub(crate) const SESSION_CANCEL: &str = "SELECT pg_cancel_backend($1) AS sent";

// The enqueue's settings around a large look-up, run prepared (see
// `prepared.rs`).
crate::prepared::statements! {
    JitOffLocal => JIT_OFF_LOCAL,
    JitRestore => JIT_RESTORE,
}
