-- Every statement of jobqueue-core/src/sql/session.rs, whole, with its doc
-- comment: written by the test of src/sql/expanded.rs, not by hand.

-- READ_COMMITTED_BEGIN
-- Opening of a queue statement's own transaction.
BEGIN ISOLATION LEVEL READ COMMITTED
;

-- SESSION_SETUP
-- Session settings of a `QueueSession`: what [`HOT_PATH_BEGIN`] sets
-- per transaction, set once for the session.
SET SESSION CHARACTERISTICS AS TRANSACTION ISOLATION LEVEL READ COMMITTED; SET SESSION enable_bitmapscan = off; SET SESSION enable_sort = off; SET SESSION enable_seqscan = off; SET SESSION enable_hashjoin = off; SET SESSION enable_mergejoin = off; SET SESSION jit = off
;

-- REPORT_BEGIN
-- Opening of a report's transaction (stats, the queue list and gauges, the
-- doctor): READ COMMITTED, without JIT compilation. A report aggregates the
-- live jobs at most, and with a large backlog the planner's cost estimate
-- crosses the JIT threshold: compiling took about 40 ms of an 80 ms count
-- at 100,000 due jobs (`jobqueue bench --only scale`).
BEGIN ISOLATION LEVEL READ COMMITTED; SET LOCAL jit = off
;

-- HOT_PATH_BEGIN
-- Opening of a hot-path statement's own transaction (claim, batch writes on
-- held jobs): READ COMMITTED, and the planner settings above for this
-- transaction only.
BEGIN ISOLATION LEVEL READ COMMITTED; SET LOCAL enable_bitmapscan = off; SET LOCAL enable_sort = off; SET LOCAL enable_seqscan = off; SET LOCAL enable_hashjoin = off; SET LOCAL enable_mergejoin = off; SET LOCAL jit = off
;

-- JIT_OFF_LOCAL
-- Turns JIT compilation off until the end of the transaction, or until
-- [`JIT_RESTORE`] of the row's `prior` (the session's setting before):
-- around a statement of an enqueue that runs in the caller's transaction
-- and whose cost estimate grows with its batch (the room of thousands of
-- keys, `KEY_ROOM_FOR_INSERT`), which the server would otherwise compile
-- at each run. Measured: 300 ms of JIT compilation for a look-up of
-- 10,000 keys that runs in 35 ms (`jobqueue bench --only keys`, server
-- log). The setting is read before it is changed: the lateral reads
-- `p.prior`, so it runs after it.
    SELECT p.prior
    FROM (SELECT current_setting('jit') AS prior OFFSET 0) AS p
    CROSS JOIN LATERAL (SELECT set_config('jit', 'off', true) AS now
                        WHERE p.prior IS NOT NULL) AS s
;

-- JIT_RESTORE
-- Sets JIT compilation back to `$1` (what [`JIT_OFF_LOCAL`] read) for the
-- rest of the transaction.
SELECT set_config('jit', $1, true) AS prior
;

-- SESSION_RUNNER_SETUP
-- What a runner thread's new connection sets and checks, in one round trip:
-- `$1` the longest it may sit idle inside a transaction
-- (`idle_in_transaction_session_timeout`, as the server reads it: `5s`), set
-- for the session; rows of `setting` (the value set) and `read_only`
-- (`on` when the server takes no writes).
SELECT set_config('idle_in_transaction_session_timeout', $1, false) AS setting,
            current_setting('transaction_read_only') AS read_only
;

-- SESSION_READ_ONLY
-- Whether the server takes writes: `on` when it does not (a standby, or
-- `default_transaction_read_only` on, as failover tools fence a demoted
-- primary), else `off`. A row of `read_only`; also sent as a simple query
-- (the listener's), whose one column is the same.
SELECT current_setting('transaction_read_only') AS read_only
;

-- SESSION_BACKEND_PID
-- The server process serving this session: a row of `n`.
SELECT pg_backend_pid() AS n
;

-- SESSION_ENDS
-- The session's TCP ends as the server sees them: a row of `client_addr`,
-- `client_port`, `server_addr`, `server_port` (NULL over a Unix socket).
SELECT host(inet_client_addr()) AS client_addr, inet_client_port() AS client_port,
            host(inet_server_addr()) AS server_addr, inet_server_port() AS server_port
;

-- SESSION_ALIVE
-- Whether the session still answers.
SELECT 1
;

-- SESSION_LISTEN
-- Subscribes the session to the wake-ups of enqueues
-- (`NOTIFY_CHANNEL`). Listening again on a channel is a no-op.
LISTEN "jobqueue_jobs"
;

-- SESSION_CLOCK
-- The database's clock at this moment (not the transaction's start, which
-- `now()` gives): a row of `now`.
SELECT clock_timestamp() AS now
;

-- SESSION_SERVER_VERSION
-- The server's version as a number (`150020` for 15.20): a row of `n`.
SELECT current_setting('server_version_num')::int4 AS n
;

-- SESSION_CANCEL
-- Asks the server to cancel the statement session `$1` runs (a session of
-- the same role, or any for a superuser); true if the signal was sent.
SELECT pg_cancel_backend($1) AS sent
;
