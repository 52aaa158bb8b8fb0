//! The statements of `jobqueue_jobs`: every job, from its insert to its
//! pruning.
//!
//! "Due" jobs are `pending`; jobs whose `run_at` is still ahead are
//! `scheduled` until [`JOB_PROMOTE_DUE`] moves them. "Held" means
//! `status IN ('claimed', 'running')`. A write that acts for a
//! worker (complete, fail, heartbeat, progress) names the job AND the fencing
//! token it got from the claim (`claim_count`), and only touches the row while
//! it is still held under that token.
//!
//! A statement on a batch of jobs reads the table by `id = ANY(<ids>)`,
//! one scan of the primary key, and joins the batch's other values to
//! nothing: they come in arrays parallel to the ids, sorted by id, and each
//! row finds its own by binary search (`width_bucket(j.id, ids)`); a CTE
//! that computes per-job values hands them on the same way
//! (`update_by_id!`). A join of the table with the batch would leave
//! the plan to the statistics and the plan cache: with statistics that
//! call the table empty it walked the whole primary key per statement, and
//! with the id list also matched by `ANY`, a generic plan compared every
//! row with every id (a million comparisons for a batch of 1,000).
//! `tests/plans.rs` checks both, with custom and generic plans.
//!
//! What the statements rely on (see the migrations):
//!
//! - the primary key `id` (a UUIDv7, so id order is insert order): the
//!   batch writes on held jobs, a job read by id, the pages of jobs newest
//!   first;
//! - `claim_count`, the fencing token a claim bumps, and `lease_expires_at`,
//!   set exactly while a job is held (constraint `lease_only_while_held`);
//! - `jobqueue_jobs_fetch_idx` (`queue, priority DESC, run_at, id` of the
//!   `pending` jobs): both claims (one ordered range per queue, and the
//!   skip from queue to queue of [`JOB_CLAIM_ANY`]), a queue's head, the
//!   counts of due jobs;
//! - `jobqueue_jobs_scheduled_idx` (`run_at` of the `scheduled` jobs): the
//!   promotion of due jobs;
//! - `jobqueue_jobs_unhandled_idx` (`job_type, queue` of the `unhandled`
//!   jobs): taking parked jobs back;
//! - `jobqueue_jobs_lease_idx` (`queue, lease_expires_at` of the held
//!   jobs): the rescue of expired leases, the counts of held jobs;
//! - `jobqueue_jobs_finished_idx` (`finished_at` of the finished jobs):
//!   pruning, and the pages and throughput of finished jobs;
//! - `jobqueue_jobs_failed_idx` (`finished_at, queue` of the `failed`
//!   jobs): the counts of the dead letter;
//! - `jobqueue_jobs_unique_key_idx` (the unique `unique_key` of the live
//!   jobs, predicate `live_predicate!`): the inserts' `ON CONFLICT`, the
//!   holders of a key, a job list filtered by key.
//!
//! Other tables some of them touch: the claims read `jobqueue_queues`
//! (`paused`, `global_limit`), both completions add to
//! `jobqueue_completions` (`count_completed!`), and [`JOB_THROUGHPUT`]
//! reads it. The statements of other tables that insert jobs (a schedule's
//! slots) are in `schedules.rs`.

/// The live statuses covered by the unique-key index.
macro_rules! live_predicate {
    () => {
        "unique_key IS NOT NULL \
         AND status IN ('waiting', 'scheduled', 'pending', 'unhandled', 'claimed', 'running')"
    };
}

/// The `key_checked` of a keyed job inserted due (`$run_at`) with key
/// `$key`, `$rank`-th of its key's due jobs in its batch, `$waits` whether
/// a due job of its key already waits (SQL expressions; `$waits` as the
/// enqueue found it, see `KEY_ROOM_FOR_INSERT` in `keys.rs`): true when a
/// due job of its key is in line ahead of it (earlier in the batch, or
/// already waiting). Such a job needs no admission pass of its own: the
/// one ahead of it is admitted first (by a pass, or when a job of the key
/// finishes), and the admission that admits it looks at the rest of the
/// line. Read only while the job is `waiting`.
macro_rules! key_checked_at_insert {
    ($run_at:literal, $key:literal, $rank:literal, $waits:literal) => {
        concat!(
            "CASE WHEN ",
            $key,
            " IS NOT NULL AND ",
            $run_at,
            " <= now() AND (",
            $rank,
            " > 1 OR ",
            $waits,
            ") THEN true END"
        )
    };
}

/// Appends one entry to the bounded error history of row `j`.
/// `$err` is the SQL expression giving the error text.
macro_rules! push_error {
    ($err:literal) => {
        concat!(
            "(CASE WHEN jsonb_array_length(j.errors) >= 10 THEN j.errors - 0 ELSE j.errors END) \
             || jsonb_build_array(jsonb_build_object('attempt', j.attempts, 'at', now(), 'error', ",
            $err,
            "))"
        )
    };
}

/// Wakes idle workers: one `pg_notify(channel, queue)` per distinct queue
/// that just got a due job, and one `pg_notify(channel, 'waiting ' ||
/// queue)` per queue that got a job waiting for its key (for the runners'
/// admission of keyed jobs; never debounced). PostgreSQL folds identical
/// notifications of one transaction into one, so a transaction wakes each
/// queue at most once. `$10` is the channel (`NOTIFY_CHANNEL`), a bound
/// parameter; `$11` false skips the notification of due jobs (see
/// `enqueue.rs`: debounce). Each row also names the database and server,
/// which the debounce is kept by.
macro_rules! notify_and_return_ids {
    () => {
        "),
        wake AS (
            SELECT count(pg_notify($10, q.queue)) AS notified
            FROM (SELECT DISTINCT queue FROM inserted WHERE $11 AND status = 'pending'
                  UNION
                  SELECT DISTINCT 'waiting ' || queue FROM inserted WHERE status = 'waiting')
                 AS q
        )
        SELECT inserted.id, (current_database() || '@'
                             || coalesce(host(inet_server_addr()), 'socket') || ':'
                             || coalesce(inet_server_port(), 0)) AS database
        FROM inserted, wake"
    };
}

/// The end of an insert of jobs that may have unique keys: none whose key
/// a live job holds; the others wake their queues
/// (`notify_and_return_ids!`).
macro_rules! unless_key_held {
    () => {
        concat!(
            "
        ON CONFLICT (unique_key) WHERE ",
            live_predicate!(),
            " DO NOTHING
        RETURNING id, queue, status",
            notify_and_return_ids!()
        )
    };
}

/// Inserts one job and wakes its queue; returns its id, or no row if a live
/// job holds its unique key.
///
/// `$1` id, `$2` job_type, `$3` queue, `$4` priority, `$5` payload (JSON text),
/// `$6` max_attempts, `$7` run_at (nullable), `$8` delay in seconds (used when
/// `$7` is null), `$9` unique_key (nullable), `$10` notify channel, `$11`
/// whether to notify, `$12` traceparent (nullable), `$13` concurrency key
/// (nullable), `$14` whether a due job of its key waits, `$15` its key's
/// room (nullable; both as the enqueue found them, see
/// `KEY_ROOM_FOR_INSERT` in `keys.rs`, and `status_at_insert!`).
pub(crate) const JOB_INSERT: &str = concat!(
    "WITH inserted AS (
        INSERT INTO jobqueue_jobs
            (id, job_type, queue, priority, payload, max_attempts, run_at, status, unique_key,
             traceparent, concurrency_key, key_checked)
        SELECT $1, $2, $3, $4, CAST($5 AS jsonb), $6, t.run_at, ",
    status_at_insert!("t.run_at", "$3", "$13::text", "$15::int4", "1", "1"),
    ", $9, $12, $13, ",
    key_checked_at_insert!("t.run_at", "$13::text", "1", "$14::bool"),
    "
        FROM (SELECT COALESCE($7, now() + make_interval(secs => $8)) AS run_at) AS t",
    unless_key_held!()
);

/// Inserts one job without a unique key and without waking anyone (the
/// common case under load, when the notification is debounced): `$1` to
/// `$8` as in [`JOB_INSERT`], `$9` traceparent (nullable).
pub(crate) const JOB_INSERT_QUIET: &str = concat!(
    "INSERT INTO jobqueue_jobs
        (id, job_type, queue, priority, payload, max_attempts, run_at, status, traceparent)
    SELECT $1, $2, $3, $4, CAST($5 AS jsonb), $6, t.run_at, ",
    status_for_run_at!("t.run_at"),
    ", $9
    FROM (SELECT COALESCE($7, now() + make_interval(secs => $8)) AS run_at) AS t"
);

/// Inserts many jobs in one statement from parallel arrays (same order as
/// [`JOB_INSERT`]'s parameters; `$12`, the one traceparent of them all;
/// `$13` the concurrency keys; `$14` and `$15` each job's key's waiting and
/// room) and wakes their queues; returns the ids actually inserted.
pub(crate) const JOB_INSERT_MANY: &str = concat!(
    "WITH inserted AS (
        INSERT INTO jobqueue_jobs
            (id, job_type, queue, priority, payload, max_attempts, run_at, status, unique_key,
             traceparent, concurrency_key, key_checked)
        SELECT t.id, t.job_type, t.queue, t.priority, CAST(t.payload AS jsonb), t.max_attempts,
               t.run_at, ",
    status_at_insert!(
        "t.run_at",
        "t.queue",
        "t.concurrency_key",
        "t.key_room",
        "t.key_rank",
        "t.key_seat"
    ),
    ", t.unique_key, $12::text, t.concurrency_key, ",
    key_checked_at_insert!("t.run_at", "t.concurrency_key", "t.key_rank", "t.key_waits"),
    "
        FROM (SELECT r.*,
                     row_number() OVER (PARTITION BY r.queue, r.concurrency_key,
                                                     r.run_at <= now()
                                        ORDER BY r.id) AS key_rank,
                     row_number() OVER (PARTITION BY r.queue, r.concurrency_key
                                        ORDER BY r.id) AS key_seat
              FROM (SELECT u.id, u.job_type, u.queue, u.priority, u.payload, u.max_attempts,
                           COALESCE(u.run_at, now() + make_interval(secs => u.delay)) AS run_at,
                           u.unique_key, u.concurrency_key, u.key_waits, u.key_room
                    FROM unnest($1::uuid[], $2::text[], $3::text[], $4::int4[], $5::text[],
                                $6::int4[], $7::timestamptz[], $8::float8[], $9::text[],
                                $13::text[], $14::bool[], $15::int4[])
                         AS u(id, job_type, queue, priority, payload, max_attempts, run_at, delay,
                              unique_key, concurrency_key, key_waits, key_room)) AS r) AS t",
    unless_key_held!()
);

/// The live jobs holding the unique keys in `$1`: `(unique_key, id)`, one
/// row per key held (through the partial unique index on live keys).
pub(crate) const JOB_LIVE_HOLDERS: &str = concat!(
    "SELECT unique_key, id FROM jobqueue_jobs WHERE unique_key = ANY($1) AND ",
    live_predicate!()
);

/// Wakes the queues in `$2` (distinct names) on channel `$1`: after a `COPY`.
pub(crate) const JOB_NOTIFY_QUEUES: &str = "SELECT pg_notify($1, q) FROM unnest($2::text[]) AS q";

/// The columns of row `j` set aside as `unhandled` by runner `$runner`
/// (an SQL expression): no runner it reached has a handler for its type.
/// A job whose cancellation was asked for is cancelled instead.
macro_rules! set_aside {
    ($runner:literal) => {
        concat!(
            "status = CASE WHEN j.cancel_requested THEN 'cancelled' ELSE 'unhandled' END,
            finished_at = CASE WHEN j.cancel_requested THEN now() ELSE NULL END,
            last_error = format('no handler for job type %s in runner %s, which works queue %s; \
                                 set aside until a runner that handles it starts', j.job_type, ",
            $runner,
            ", j.queue)"
        )
    };
}

/// One range of a queue's part in `claim_from_ready!`, as `$name`: the
/// `pending` jobs of `quota.queue` that also meet `$cond` (SQL), in claim
/// order (`jobqueue_jobs_fetch_idx`), at most the queue's quota, locked.
macro_rules! quota_range {
    ($name:literal, $cond:literal) => {
        concat!(
            "SELECT ",
            $name,
            ".id, ",
            $name,
            ".job_type FROM (
                    SELECT p.id, p.job_type
                    FROM jobqueue_jobs AS p
                    WHERE p.status = 'pending' AND p.queue = quota.queue
                      AND ",
            $cond,
            "
                    ORDER BY p.priority DESC, p.run_at, p.id
                    LIMIT quota.n
                    FOR UPDATE SKIP LOCKED
                ) AS ",
            $name
        )
    };
}

/// The end of both claim statements, after `found` (the queues with due
/// jobs): takes up to `$2` jobs, split evenly among the queues of `found`
/// that may be claimed from, best first within each queue, and claims them
/// for worker `$3` with a lease of `$4` seconds.
///
/// A queue is left out while paused (`jobqueue_queues.paused`), while
/// backed off (`backoff_until`, a handler's "retry after"), and while it
/// has a global limit or a rate limit unless it is in CTE `limited`
/// (`name`, `room`): the limited queues whose `jobqueue_queues` row this
/// statement locked (`lock_limited!`), each capped at the room its limits
/// leave, so that concurrent claims never take more than the limits
/// together. A claimed job's `claimed_at` is the claim statement's time: a
/// rate-limited queue's starts are counted by it. `$5`/`$6` (names,
/// counts) cap a queue's part for this claim (a runner's own per-queue
/// concurrency).
///
/// Each queue's part is one ordered range of `jobqueue_jobs_fetch_idx`, so
/// a claim never steps over another queue's backlog. Each claim uses up an
/// attempt and bumps the fencing token.
///
/// A queue of `found` with a resume point (`after_priority`, `after_run_at`,
/// `after_id`: the last job an earlier claim took from it) is read in three
/// ranges instead of one from its start: its higher priorities from the
/// start, its resume point's priority after the point, its lower
/// priorities from the start. Together they are the queue's order without
/// what sorts before the point at its priority, where the versions of the
/// jobs claimed so far lie (see `Claim::resume`).
///
/// Jobs whose type is not one of `$12` (when not empty: the types the
/// claimer has handlers for) are not claimed but set aside as `unhandled`
/// in the same statement (`set_aside!`), and returned with that status:
/// one write each instead of a claim and a second statement to park them.
macro_rules! claim_from_ready {
    ($now:literal) => {
        concat!(
            "ready AS (
            SELECT f.queue, f.after_priority, f.after_run_at, f.after_id,
                   least($2::int8, r.room, l.room) AS room
            FROM found AS f
            LEFT JOIN jobqueue_queues AS c ON c.name = f.queue
            LEFT JOIN unnest($5::text[], $6::int8[]) AS r(queue, room) ON r.queue = f.queue
            LEFT JOIN limited AS l ON l.name = f.queue
            WHERE c.paused IS NOT TRUE
              AND NOT coalesce(c.backoff_until > now(), false)
              AND least($2::int8, r.room, l.room) > 0
              AND ((c.global_limit IS NULL AND c.rate_starts IS NULL) OR l.name IS NOT NULL)
        ),
        share AS (
            SELECT ceil($2::float8 / greatest(count(*), 1))::int8 AS n FROM ready
        ),
        quota AS (
            SELECT ready.queue, ready.after_priority, ready.after_run_at, ready.after_id,
                   least(share.n, ready.room) AS n
            FROM ready CROSS JOIN share
        ),
        picked AS (
            SELECT c.id,
                   cardinality($12::text[]) = 0 OR c.job_type = ANY($12::text[]) AS handled
            FROM quota
            CROSS JOIN LATERAL (
                ",
            quota_range!("from_start", "quota.after_priority IS NULL"),
            "
                UNION ALL
                ",
            quota_range!("higher", "p.priority > quota.after_priority"),
            "
                UNION ALL
                ",
            quota_range!(
                "after_point",
                "p.priority = quota.after_priority
                      AND (p.run_at, p.id) > (quota.after_run_at, quota.after_id)"
            ),
            "
                UNION ALL
                ",
            quota_range!("lower", "p.priority < quota.after_priority"),
            "
                LIMIT quota.n
            ) AS c
            LIMIT $2
        ),
        claimed AS (
            UPDATE jobqueue_jobs AS j
            SET status = 'claimed',
                worker_id = $3,
                attempts = j.attempts + 1,
                claim_count = j.claim_count + 1,
                claimed_at = ",
            $now,
            ",
                heartbeat_at = ",
            $now,
            ",
                lease_expires_at = ",
            $now,
            " + make_interval(secs => $4),
                started_at = NULL,
                progress = 0,
                current_stage = NULL
            WHERE j.id = ANY(ARRAY(SELECT id FROM picked WHERE handled))
            RETURNING j.*
        ),
        set_aside AS (
            UPDATE jobqueue_jobs AS j
            SET ",
            set_aside!("$3"),
            "
            WHERE j.id = ANY(ARRAY(SELECT id FROM picked WHERE NOT handled))
            RETURNING j.*
        )"
        )
    };
}

/// No queue locked by the claim (`claim_from_ready!`'s CTE `limited`
/// empty): the claim leaves out every queue with a global limit or a rate
/// limit.
macro_rules! none_limited {
    () => {
        "limited AS (SELECT NULL::text AS name, NULL::int8 AS room WHERE false)"
    };
}

/// The end of a claim that locks no queue: the jobs claimed and set aside.
macro_rules! claimed_rows {
    () => {
        "
        SELECT * FROM claimed UNION ALL SELECT * FROM set_aside"
    };
}

/// The margin of a rate limit, for the queue row `$q` (an SQL alias): how
/// long after its claim a claimed job's handler may start (a fortieth of
/// the period, at least 25 ms). A runner hands back unstarted a job it
/// could not start within it (see `Claimed::rate_margins`).
macro_rules! rate_margin {
    ($q:literal) => {
        concat!(
            "greatest(",
            $q,
            ".rate_period / 40, interval '25 milliseconds')"
        )
    };
}

/// How long a claim's starts count against a rate limit, for the queue row
/// `$q`: its period and its margin (`rate_margin!`). Each handler starts
/// between its claim and the margin after it, so claims that count each
/// other's starts for that much longer than the period keep the handlers'
/// starts within the limit in every window of the period.
macro_rules! rate_span {
    ($q:literal) => {
        concat!("(", $q, ".rate_period + ", rate_margin!($q), ")")
    };
}

/// The start of a claim that honours global and rate limits: CTE
/// `limited` (`name`, `room`), the queues with a global limit or a rate
/// limit among `$1` (every queue if empty) that have due jobs, each with
/// the room its limits leave this claim (the lesser of the two rooms below;
/// `least` passes over the null of a queue without a rate limit).
///
/// `locked` locks their `jobqueue_queues` rows, in name order, for the
/// rest of the transaction: claims of a limited queue take turns, and a
/// row another claim updated while this one waited is read as that claim
/// left it. Under any isolation but READ COMMITTED it locks nothing, and
/// the claim leaves limited queues out: a row read under an older snapshot
/// would not show the claims committed since.
///
/// `clock` is the claim's time: the server's clock read once every lock is
/// held (after `locked` is read whole). Claims that take turns on a row read
/// it in the order they got the lock, so a claim never counts its window at
/// a time before the one at which the claim before it cut entries off the
/// window; the statement's own start would be such a time for a claim that
/// waited for the lock, and it would miss starts that still count. The
/// claimed jobs' `claimed_at` is that time too, so a rate limit holds
/// exactly as `claimed_at` shows it.
///
/// `used`, per locked queue:
/// - `held_room`, the room under its global limit: its limit minus what
///   bounds its held jobs from above, `held_counted + claimed_since` (the
///   last count, and what claims under the lock took since; jobs only
///   become held through such claims). When that leaves less room than
///   the whole claim `$2`, or the queue was never counted, the queue is to
///   be counted again (`recount`; the count must come after the lock, in a
///   later statement, to see the claims committed while this one waited)
///   and this claim takes at most what the bound leaves (never more than
///   `$2`, as otherwise);
/// - `rate_room`, the room under its rate limit (null without one): its
///   starts per period minus the starts its window holds that count at
///   the claim's time (a claim's starts count for a whole period from
///   their window entry, the end of the claim's slot: `note_limited!`);
///   the entries that no longer count are found by binary search;
/// - `room_in`, when the window next drops a start, from the claim's time.
macro_rules! lock_limited {
    () => {
        concat!(
            "locked AS MATERIALIZED (
        SELECT c.name, c.global_limit, c.held_counted, c.claimed_since, c.rate_starts,
               c.rate_period, c.rate_at, c.rate_jobs
        FROM jobqueue_queues AS c
        WHERE (c.global_limit IS NOT NULL OR c.rate_starts IS NOT NULL)
          AND (cardinality($1::text[]) = 0 OR c.name = ANY($1::text[]))
          AND current_setting('transaction_isolation') = 'read committed'
          AND (SELECT true FROM jobqueue_jobs AS p
               WHERE p.status = 'pending' AND p.queue = c.name LIMIT 1)
        ORDER BY c.name
        FOR NO KEY UPDATE OF c
    ),
    clock AS MATERIALIZED (
        SELECT clock_timestamp() AS now FROM (SELECT count(*) FROM locked) AS every_lock
    ),
    used AS (
        SELECT k.name,
               CASE WHEN h.recount
                    THEN greatest(k.global_limit - coalesce(h.bound, k.global_limit), 0)
                    ELSE $2::int8
               END AS held_room,
               h.recount,
               CASE WHEN k.rate_starts IS NOT NULL
                    THEN greatest(k.rate_starts - w.starts, 0)::int8
               END AS rate_room,
               CASE WHEN k.rate_starts IS NOT NULL THEN $14::int8 END AS start_room,
               k.rate_starts,
               CASE WHEN k.rate_starts IS NOT NULL THEN ",
            rate_margin!("k"),
            " END AS margin,
               w.first + ",
            rate_span!("k"),
            " - clock.now AS room_in
        FROM locked AS k
        CROSS JOIN clock
        CROSS JOIN LATERAL (
            SELECT b.bound,
                   k.global_limit IS NOT NULL
                   AND coalesce(b.bound + $2::int8 > k.global_limit, true) AS recount
            FROM (SELECT k.held_counted::int8 + k.claimed_since AS bound) AS b
        ) AS h
        CROSS JOIN LATERAL (
            SELECT (SELECT coalesce(sum(n), 0) FROM unnest(k.rate_jobs[g.gone + 1:]) AS n)
                       AS starts,
                   k.rate_at[g.gone + 1] AS first
            FROM (SELECT width_bucket(clock.now - ",
            rate_span!("k"),
            ", k.rate_at) AS gone)
                 AS g
        ) AS w
    ),
    limited AS (
        SELECT u.name, least(u.held_room, u.rate_room, u.start_room) AS room
        FROM used AS u
    )"
        )
    };
}

/// The end of a claim that began with `lock_limited!`: notes what it took
/// from each locked queue, and returns the jobs claimed and set aside,
/// each with `recount` (the locked queues to count again) and
/// `rate_room_in_micros` (when a queue whose rate limit left it less room
/// than the claim could take gets room again, from this statement; null
/// when no rate limit held the claim back), `rated` and
/// `rated_margin_micros` (the locked queues with a rate limit whose window
/// this claim left more than half full, and how long after the statement
/// was sent their jobs' handlers may start: the limit's margin plus the
/// time the statement waited for its locks, so that no handler starts
/// later than the margin after the claim's time; a window at most half
/// full leaves room for late starts, and a runner on a loaded machine
/// whose starts all come late still works a limit that does not bind). A
/// claim that took nothing returns one row of those with null job columns.
///
/// `noted` adds the jobs to the `claimed_since` of a queue with a global
/// limit, and to the window of a queue with a rate limit. The window is a
/// pair of arrays sorted by time (`rate_at`, `rate_jobs`): the entries
/// that left it by this claim's time are cut off its front (found by
/// binary search, `width_bucket`), and the claim is kept under the end of
/// its slot, appended (slots are a thousandth of the period long on a
/// fixed grid, at least 1 µs, so the window holds at most about a
/// thousand entries), or added to the last entry when that is as late or
/// later (a claim of the same slot; or one that began before the claim
/// that noted the last entry, and waited for its lock: counted under that
/// later time, a little longer than its period, never shorter). No step
/// reads the whole window but the sum of its starts.
macro_rules! note_limited {
    () => {
        concat!(
            ",
    took AS (
        SELECT j.queue, count(*)::int4 AS n
        FROM claimed AS j
        JOIN limited AS l ON l.name = j.queue
        GROUP BY j.queue
    ),
    noted AS (
        UPDATE jobqueue_queues AS c
        SET claimed_since = c.claimed_since
                            + CASE WHEN c.global_limit IS NULL THEN 0 ELSE t.n END,
            (rate_at, rate_jobs) = (
                SELECT CASE WHEN c.rate_starts IS NULL THEN c.rate_at
                            WHEN w.last >= w.entry THEN w.at
                            ELSE w.at || w.entry
                       END,
                       CASE WHEN c.rate_starts IS NULL THEN c.rate_jobs
                            WHEN w.last >= w.entry
                            THEN w.jobs[:cardinality(w.jobs) - 1]
                                 || (w.jobs[cardinality(w.jobs)] + t.n)
                            ELSE w.jobs || t.n
                       END
                FROM (
                    SELECT k.at, k.jobs, k.at[cardinality(k.at)] AS last,
                           'epoch'::timestamptz
                               + interval '1 microsecond' * ((e.now + e.slot - 1) / e.slot * e.slot)
                               AS entry
                    FROM (SELECT c.rate_at[g.gone + 1:] AS at, c.rate_jobs[g.gone + 1:] AS jobs
                          FROM (SELECT width_bucket(clock.now - ",
            rate_span!("c"),
            ", c.rate_at) AS gone) AS g) AS k,
                         (SELECT (EXTRACT(EPOCH FROM clock.now) * 1000000)::int8
                                     AS now,
                                 greatest((EXTRACT(EPOCH FROM c.rate_period) * 1000000)::int8
                                          / 1000, 1) AS slot) AS e
                ) AS w
            )
        FROM took AS t, clock
        WHERE c.name = t.queue
    ),
    summary AS (
        SELECT coalesce(array_agg(u.name ORDER BY u.name) FILTER (WHERE u.recount), '{}')
                   AS recount,
               (EXTRACT(EPOCH FROM min(u.room_in) FILTER (
                    WHERE u.rate_room < u.held_room)) * 1000000)::int8
                   AS rate_room_in_micros,
               coalesce(array_agg(u.name ORDER BY u.name) FILTER (WHERE u.near_full),
                        '{}') AS rated,
               coalesce(array_agg((EXTRACT(EPOCH FROM u.margin + (clock.now - statement_timestamp()))
                                   * 1000000)::int8
                                  ORDER BY u.name) FILTER (WHERE u.near_full),
                        '{}') AS rated_margin_micros
        FROM (SELECT u.*,
                     u.margin IS NOT NULL
                     AND 2 * (u.rate_room - coalesce(t.n, 0)) < u.rate_starts AS near_full
              FROM used AS u LEFT JOIN took AS t ON t.queue = u.name) AS u
        CROSS JOIN clock
    )
    SELECT s.recount, s.rate_room_in_micros, s.rated, s.rated_margin_micros, j.*
    FROM summary AS s
    LEFT JOIN (SELECT * FROM claimed UNION ALL SELECT * FROM set_aside) AS j ON true"
        )
    };
}

/// The claim of named queues, with CTE `limited` from `$limited` (SQL: the
/// queues it locked) and `$end` (SQL: what it returns) after
/// `claim_from_ready!`.
macro_rules! claim_queues {
    ($limited:expr, $now:literal, $end:expr) => {
        concat!(
            "WITH ",
            $limited,
            ",
    named AS (
        SELECT q.queue, w.priority AS after_priority, w.run_at AS after_run_at,
               w.id AS after_id
        FROM unnest($1::text[]) AS q(queue)
        LEFT JOIN unnest($7::text[], $8::int4[], $9::timestamptz[], $10::uuid[])
                  AS w(queue, priority, run_at, id)
               ON w.queue = q.queue
    ),
    found AS (
        SELECT n.* FROM named AS n
        WHERE EXISTS (SELECT 1 FROM jobqueue_jobs AS p
                      WHERE n.after_priority IS NULL
                        AND p.status = 'pending' AND p.queue = n.queue)
           OR EXISTS (SELECT 1 FROM jobqueue_jobs AS p
                      WHERE p.status = 'pending' AND p.queue = n.queue
                        AND p.priority > n.after_priority)
           OR EXISTS (SELECT 1 FROM jobqueue_jobs AS p
                      WHERE p.status = 'pending' AND p.queue = n.queue
                        AND p.priority = n.after_priority
                        AND (p.run_at, p.id) > (n.after_run_at, n.after_id))
           OR EXISTS (SELECT 1 FROM jobqueue_jobs AS p
                      WHERE p.status = 'pending' AND p.queue = n.queue
                        AND p.priority < n.after_priority)
    ),
    ",
            claim_from_ready!($now),
            $end
        )
    };
}

/// Claims up to `$2` due jobs from the queues named in `$1` (distinct
/// names), for worker `$3`, lease `$4` seconds: see `claim_from_ready!`.
/// Queues without due jobs take no part of the claim. `$7` to `$10`
/// (queue, priority, run_at, id) are resume points, at most one per queue:
/// whether a queue that has one has due jobs is looked up in the same
/// three ranges.
pub(crate) const JOB_CLAIM_QUEUES: &str =
    claim_queues!(none_limited!(), "statement_timestamp()", claimed_rows!());

/// [`JOB_CLAIM_QUEUES`], honouring global and rate limits: locks the
/// limited queues' rows first and notes what it took from them
/// (`lock_limited!`, `note_limited!`).
pub(crate) const JOB_CLAIM_QUEUES_LIMITED: &str =
    claim_queues!(lock_limited!(), "(SELECT now FROM clock)", note_limited!());

/// Whether queue `$q` (an SQL expression) may be claimed from, as `ready`
/// in `claim_from_ready!` decides: not paused, not limited unless locked
/// by this claim (in `limited`, with room), not capped at zero (`$5`/`$6`).
macro_rules! claimable {
    ($q:literal) => {
        concat!(
            "(NOT EXISTS (SELECT 1 FROM jobqueue_queues AS c
                         WHERE c.name = ",
            $q,
            "
                           AND (c.paused OR coalesce(c.backoff_until > now(), false)
                                OR ((c.global_limit IS NOT NULL OR c.rate_starts IS NOT NULL)
                                    AND NOT EXISTS (SELECT 1 FROM limited AS l
                                                    WHERE l.name = ",
            $q,
            "))))
              AND coalesce((SELECT r.room FROM unnest($5::text[], $6::int8[]) AS r(queue, room)
                            WHERE r.queue = ",
            $q,
            " LIMIT 1), 1) > 0
              AND coalesce((SELECT l.room FROM limited AS l WHERE l.name = ",
            $q,
            "), 1) > 0)"
        )
    };
}

/// The most queues a claim of every queue takes jobs from: its limit `$2`,
/// up to `$13` (`MAX_CLAIM_QUEUES`). Past that, the queues' shares grow
/// instead (a queue's part is one ordered range, cheaper per job than a
/// queue more), and the claims after it take the next queues in turn.
macro_rules! walk_limit {
    () => {
        "least($2::int8, $13::int8)"
    };
}

/// One leg of the walk of [`JOB_CLAIM_ANY`]: the queues with due jobs
/// after `$from` (exclusive) whose name `p.queue` meets `$bound` (SQL),
/// in name order, one index descent each, with `n`: the claimable queues
/// found so far, counting from `$counted` (an SQL expression); the walk
/// stops once `n` reaches `walk_limit!`.
macro_rules! walk_queues {
    ($name:literal, $from:literal, $bound:literal, $counted:literal) => {
        concat!(
            $name,
            " AS (
        SELECT first.queue,
               ",
            $counted,
            " + CASE WHEN first.queue IS NOT NULL AND ",
            claimable!("first.queue"),
            " THEN 1 ELSE 0 END AS n
        FROM (SELECT (SELECT p.queue FROM jobqueue_jobs AS p
                      WHERE p.status = 'pending' AND p.queue > ",
            $from,
            "
                        AND ",
            $bound,
            "
                      ORDER BY p.queue LIMIT 1) AS queue
              WHERE ",
            $counted,
            " < ",
            walk_limit!(),
            "
              OFFSET 0) AS first
        UNION ALL
        SELECT next.queue,
               w.n + CASE WHEN next.queue IS NOT NULL AND ",
            claimable!("next.queue"),
            " THEN 1 ELSE 0 END
        FROM ",
            $name,
            " AS w
        CROSS JOIN LATERAL (
            SELECT (SELECT p.queue FROM jobqueue_jobs AS p
                    WHERE p.status = 'pending' AND p.queue > w.queue
                      AND ",
            $bound,
            "
                    ORDER BY p.queue LIMIT 1) AS queue
            OFFSET 0
        ) AS next
        WHERE w.queue IS NOT NULL AND w.n < ",
            walk_limit!(),
            "
    )"
        )
    };
}

/// The claim of every queue, with CTE `limited` from `$limited` and `$end`
/// as in `claim_queues!`.
macro_rules! claim_any {
    ($limited:expr, $now:literal, $end:expr) => {
        concat!(
            "WITH RECURSIVE ",
            $limited,
            ",
    ",
            walk_queues!("after_start", "$11::text", "true", "0"),
            ",
    ",
            walk_queues!(
                "wrapped",
                "''",
                "p.queue <= $11::text",
                "(SELECT coalesce(max(a.n), 0) FROM after_start AS a)"
            ),
            ",
    found AS (
        SELECT queue, NULL::int4 AS after_priority, NULL::timestamptz AS after_run_at,
               NULL::uuid AS after_id
        FROM (SELECT queue FROM after_start UNION ALL SELECT queue FROM wrapped) AS walked
        WHERE queue IS NOT NULL
    ),
    ",
            claim_from_ready!($now),
            $end
        )
    };
}

/// Claims up to `$2` due jobs from the queues that have some, for worker
/// `$3`, lease `$4` seconds: see `claim_from_ready!`. The queues are found
/// by a walk through `jobqueue_jobs_fetch_idx`, one queue name at a time
/// (one index descent per queue, whatever each queue's backlog), that
/// starts after queue `$11` (`''`: at the first queue), wraps around to
/// the first queue, and stops once it found `walk_limit!` queues that
/// may be claimed from: a claim's cost grows with its limit, not with the
/// number of queues that have due jobs, and claims that each start after
/// the last queue the one before took from go round every queue in turn.
/// `$1` (the claim's queues) is empty, which `lock_limited!` reads as
/// every queue, and there are no resume points (`$7` to `$10` go unused),
/// so every claim binds the same parameters.
pub(crate) const JOB_CLAIM_ANY: &str =
    claim_any!(none_limited!(), "statement_timestamp()", claimed_rows!());

/// [`JOB_CLAIM_ANY`], honouring global and rate limits, as
/// [`JOB_CLAIM_QUEUES_LIMITED`] does.
pub(crate) const JOB_CLAIM_ANY_LIMITED: &str =
    claim_any!(lock_limited!(), "(SELECT now FROM clock)", note_limited!());

/// Looks for the first due job of each queue in `$1` (distinct names)
/// from the start of its range of `jobqueue_jobs_fetch_idx`, as a claim
/// without a resume point does, and counts the index entries each look
/// read to get there (this session's count of entries the index returned,
/// before and after it: each lateral step depends on the one before, so
/// they run in that order, queue by queue): one when nothing is in the
/// way, more for every job claimed since the oldest open snapshot began.
/// Returns per queue that count and the job's place in the claim order
/// (null when the queue has no due job).
pub(crate) const JOB_QUEUE_HEADS: &str = "
    SELECT q.queue, (after.n - before.n)::int8 AS entries_read,
           head.priority, head.run_at, head.id
    FROM unnest($1::text[]) WITH ORDINALITY AS q(queue, i)
    CROSS JOIN LATERAL (
        SELECT pg_stat_get_xact_tuples_returned('jobqueue_jobs_fetch_idx'::regclass)
               + 0 * q.i AS n
    ) AS before
    LEFT JOIN LATERAL (
        SELECT p.priority, p.run_at, p.id
        FROM jobqueue_jobs AS p
        WHERE p.status = 'pending' AND p.queue = q.queue AND before.n IS NOT NULL
        ORDER BY p.priority DESC, p.run_at, p.id
        LIMIT 1
    ) AS head ON true
    CROSS JOIN LATERAL (
        SELECT pg_stat_get_xact_tuples_returned('jobqueue_jobs_fetch_idx'::regclass)
               + 0 * coalesce(head.priority, 0) AS n
    ) AS after
    ORDER BY q.i";

/// The rows of `jobqueue_jobs AS j` still held under the leases of arrays
/// `$1` ids (sorted) and `$2` tokens: a job recovered meanwhile, and maybe
/// claimed again under another token, is left alone.
macro_rules! held_by_token {
    () => {
        "WHERE j.id = ANY($1::uuid[])
      AND j.claim_count = ($2::int4[])[width_bucket(j.id, $1::uuid[])]
      AND j.status IN ('claimed', 'running')"
    };
}

/// Marks held jobs as started (`claimed` -> `running`). Arrays `$1` ids, `$2` tokens.
pub(crate) const JOB_START_MANY: &str = concat!(
    "
    UPDATE jobqueue_jobs AS j
    SET status = 'running',
        started_at = COALESCE(j.started_at, now())
    ",
    held_by_token!(),
    "
    RETURNING j.id"
);

/// Adds the jobs of CTE `done` (`queue`, `job_type`) to this minute's
/// completion counts of the connection's own server process (see the
/// `completion_counts` migration): the second half of both completions,
/// so completed jobs are counted whether their rows are kept or not.
macro_rules! count_completed {
    () => {
        "
    counted AS (
        INSERT INTO jobqueue_completions AS c (minute, queue, job_type, backend, completed)
        SELECT date_trunc('minute', now()), queue, job_type, pg_backend_pid(), count(*)
        FROM done
        GROUP BY queue, job_type
        ON CONFLICT (minute, queue, job_type, backend)
        DO UPDATE SET completed = c.completed + EXCLUDED.completed
    )"
    };
}

/// The rows of `held_by_token!`, as the completions' CTE `done` returns
/// them.
macro_rules! completed_held {
    () => {
        concat!(
            "
        ",
            held_by_token!(),
            "
        RETURNING j.id, j.queue, j.job_type
    ),"
        )
    };
}

/// The completions' CTE `done`: the held jobs of `completed_held!`
/// rewritten as `completed`.
macro_rules! completed_in_place {
    () => {
        concat!(
            "
    WITH done AS (
        UPDATE jobqueue_jobs AS j
        SET status = 'completed',
            finished_at = now(),
            started_at = COALESCE(j.started_at, j.claimed_at),
            progress = 100,
            lease_expires_at = NULL,
            cancel_requested = false
",
            completed_held!()
        )
    };
}

/// The completions' CTE `done`: the held jobs of `completed_held!`
/// deleted.
macro_rules! completed_by_delete {
    () => {
        concat!(
            "
    WITH done AS (
        DELETE FROM jobqueue_jobs AS j
",
            completed_held!()
        )
    };
}

/// Completes held jobs in one statement, keeping their rows as `completed`
/// (a retention above zero for completed jobs), and counts them. Arrays
/// `$1` ids, `$2` tokens; returns the ids it completed (a job whose token no
/// longer matches is left alone).
pub(crate) const JOB_COMPLETE_MANY: &str = concat!(
    completed_in_place!(),
    count_completed!(),
    "
    SELECT id FROM done"
);

/// Completes held jobs by deleting them, and counts them, in one statement:
/// for completed jobs kept for no time (`Retention::completed` of zero).
/// A delete writes no new row version and no index entry, and
/// leaves nothing to prune. Arrays `$1` ids, `$2` tokens; returns the ids it
/// completed.
pub(crate) const JOB_COMPLETE_DELETE_MANY: &str = concat!(
    completed_by_delete!(),
    count_completed!(),
    "
    SELECT id FROM done"
);

/// The steps of the workflow jobs of CTE `done` (completed), marked
/// `completed` with their results (array `$3`, JSON text parallel to the
/// ids `$1`; null: none), as CTE `ended`; then their children released
/// (`release_children!`) and their queues woken on channel `$4`. Returns
/// the ids completed.
macro_rules! complete_steps {
    () => {
        concat!(
            ",
    ended AS (
        UPDATE jobqueue_workflow_steps AS s
        SET state = 'completed',
            ended_at = now(),
            result = CAST(($3::text[])[width_bucket(s.job_id, $1::uuid[])] AS jsonb)
        FROM done
        WHERE s.job_id = done.id AND s.state <> 'completed'
        RETURNING s.job_id
    ),",
            release_children!("true", "$4"),
            "
    SELECT done.id FROM done LEFT JOIN wake ON true"
        )
    };
}

/// [`JOB_COMPLETE_MANY`] of jobs of workflows: their steps completed and
/// their children released in the same statement (`complete_steps!`).
pub(crate) const JOB_COMPLETE_STEPS_MANY: &str =
    concat!(completed_in_place!(), count_completed!(), complete_steps!());

/// [`JOB_COMPLETE_DELETE_MANY`] of jobs of workflows: their steps
/// completed and their children released in the same statement
/// (`complete_steps!`).
pub(crate) const JOB_COMPLETE_DELETE_STEPS_MANY: &str = concat!(
    completed_by_delete!(),
    count_completed!(),
    complete_steps!()
);

/// The jobs of arrays `$1` ids still held under the tokens `$2`, rows
/// locked, each with its delay `$3` (seconds) and the columns `$more` adds
/// (`, ($4::text[])[i] AS error`), as `l`: the `FROM` and `WHERE` of a CTE
/// `next` of `update_by_id!`.
macro_rules! held_with_delays {
    ($more:literal) => {
        concat!(
            "FROM jobqueue_jobs AS j
        CROSS JOIN LATERAL (
            SELECT ($2::int4[])[i] AS token, ($3::float8[])[i] AS delay",
            $more,
            "
            FROM width_bucket(j.id, $1::uuid[]) AS i
        ) AS l
        WHERE j.id = ANY($1::uuid[])
          AND j.claim_count = l.token
          AND j.status IN ('claimed', 'running')
        FOR UPDATE OF j"
        )
    };
}

/// The rows of a CTE `next` (each job's `id`, `next_status` and the
/// columns named in `$col`s) as arrays in id order, CTE `by_id`; then the
/// `UPDATE` of those jobs that sets each one's status to its
/// `next_status`, and reads its other values the same way:
/// `by_id.<column>[width_bucket(j.id, by_id.ids)]`.
macro_rules! update_by_id {
    ($($col:literal),*) => {
        concat!(
            "by_id AS (
        SELECT array_agg(id ORDER BY id) AS ids,
               array_agg(next_status ORDER BY id) AS next_status",
            $(",
               array_agg(", $col, " ORDER BY id) AS ", $col,)*
            "
        FROM next
    )
    UPDATE jobqueue_jobs AS j
    SET status = by_id.next_status[width_bucket(j.id, by_id.ids)],"
        )
    };
}

/// The end of an `update_by_id!` of jobs no runner holds any more, whose
/// `by_id` has each one's `error`: no lease; the error recorded as the
/// last, and in the history.
macro_rules! error_by_id {
    () => {
        concat!(
            "
        lease_expires_at = NULL,
        last_error = by_id.error[width_bucket(j.id, by_id.ids)],
        errors = ",
            push_error!("by_id.error[width_bucket(j.id, by_id.ids)]"),
            "
    FROM by_id
    WHERE j.id = ANY(by_id.ids)"
        )
    };
}

/// Records failed attempts of held jobs in one statement.
///
/// Arrays: `$1` ids, `$2` tokens, `$3` retry delay in seconds (null: permanent
/// failure), `$4` error text. A job goes back to `scheduled` (`pending` if
/// the delay is zero) at `now() + delay` while it has attempts left, to `failed` otherwise, and to
/// `cancelled` if a cancel was requested meanwhile. Returns id, new status and
/// run_at of each job it changed.
pub(crate) const JOB_FAIL_MANY: &str = concat!(
    "WITH next AS (
        SELECT j.id, l.delay, l.error,
               CASE WHEN j.cancel_requested THEN 'cancelled'
                    WHEN l.delay IS NULL OR j.attempts >= j.max_attempts THEN 'failed'
                    WHEN l.delay <= 0 THEN 'pending'
                    ELSE 'scheduled' END AS next_status
        ",
    held_with_delays!(", ($4::text[])[i] AS error"),
    "
    ),
    ",
    update_by_id!("delay", "error"),
    "
        run_at = CASE WHEN by_id.next_status[width_bucket(j.id, by_id.ids)] IN ('pending', 'scheduled')
                      THEN now() + make_interval(secs => by_id.delay[width_bucket(j.id, by_id.ids)]) ELSE j.run_at END,
        finished_at = CASE WHEN by_id.next_status[width_bucket(j.id, by_id.ids)] IN ('pending', 'scheduled') THEN NULL ELSE now() END,
        worker_id = CASE WHEN by_id.next_status[width_bucket(j.id, by_id.ids)] IN ('pending', 'scheduled') THEN NULL ELSE j.worker_id END,",
    error_by_id!(),
    "
    RETURNING j.id, j.status, j.run_at"
);

/// Renews the leases of held jobs, and writes the progress their handlers
/// reported since the last renewal. Arrays `$1` ids, `$2` tokens, `$3`
/// lease in seconds; arrays parallel to the ids (or empty, when no job of
/// the batch reported any): `$4` percent (null: unchanged), `$5` stage
/// (null: unchanged), `$6` events to add (null: the job reported nothing,
/// else it marks it `running`). The event count stops at the column's
/// largest value rather than fail the batch. Returns each renewed job with
/// its cancel flag; jobs no longer held under their token are absent.
pub(crate) const JOB_HEARTBEAT_MANY: &str = concat!(
    "
    UPDATE jobqueue_jobs AS j
    SET heartbeat_at = now(),
        lease_expires_at = now() + make_interval(secs => $3),
        progress = COALESCE(($4::int2[])[width_bucket(j.id, $1::uuid[])], j.progress),
        current_stage = COALESCE(($5::text[])[width_bucket(j.id, $1::uuid[])], j.current_stage),
        events_count = LEAST(j.events_count::int8
                             + COALESCE(($6::int4[])[width_bucket(j.id, $1::uuid[])], 0),
                             2147483647)::int4,
        status = CASE WHEN ($6::int4[])[width_bucket(j.id, $1::uuid[])] IS NULL
                      THEN j.status ELSE 'running' END,
        started_at = CASE WHEN ($6::int4[])[width_bucket(j.id, $1::uuid[])] IS NULL
                          THEN j.started_at ELSE COALESCE(j.started_at, now()) END
    ",
    held_by_token!(),
    "
    RETURNING j.id, j.cancel_requested"
);

/// Records progress of one held job: `$1` id, `$2` token, `$3` percent
/// (nullable: unchanged), `$4` stage (nullable: unchanged), `$5` events to add.
/// Marks the job running. Returns its cancel flag.
pub(crate) const JOB_PROGRESS: &str = "
    UPDATE jobqueue_jobs AS j
    SET progress = COALESCE($3, j.progress),
        current_stage = COALESCE($4, j.current_stage),
        events_count = j.events_count + $5,
        status = 'running',
        started_at = COALESCE(j.started_at, now())
    WHERE j.id = $1
      AND j.claim_count = $2
      AND j.status IN ('claimed', 'running')
    RETURNING j.cancel_requested";

/// Cancels job `$1`: a job not held (waiting, scheduled, pending, unhandled) at once,
/// a held one by raising its cancel flag (its handler sees it; its runner
/// finishes it as `cancelled`). Returns the resulting status; no row if the
/// job is finished or unknown.
pub(crate) const JOB_CANCEL: &str = "
    UPDATE jobqueue_jobs AS j
    SET status = CASE WHEN j.status IN ('claimed', 'running') THEN j.status ELSE 'cancelled' END,
        finished_at = CASE WHEN j.status IN ('claimed', 'running') THEN j.finished_at ELSE now() END,
        cancel_requested = j.status IN ('claimed', 'running')
    WHERE j.id = $1
      AND j.status IN ('blocked', 'waiting', 'scheduled', 'pending', 'unhandled', 'claimed',
                       'running')
    RETURNING j.status, j.workflow_id IS NOT NULL AS in_workflow, j.queue,
              j.concurrency_key AS key";

/// Marks held jobs as cancelled (their handler stopped after a cancel request).
/// Arrays `$1` ids, `$2` tokens; returns the ids changed.
pub(crate) const JOB_CANCEL_HELD_MANY: &str = concat!(
    "
    UPDATE jobqueue_jobs AS j
    SET status = 'cancelled',
        finished_at = now(),
        lease_expires_at = NULL
    ",
    held_by_token!(),
    "
    RETURNING j.id"
);

/// The end of an `UPDATE` of held jobs (`held_by_token!`) handed back
/// unstarted: the attempt their claim took is not used up, and no runner
/// holds them.
macro_rules! given_back {
    () => {
        concat!(
            "attempts = j.attempts - 1,
        worker_id = NULL,
        lease_expires_at = NULL,
        started_at = NULL
    ",
            held_by_token!()
        )
    };
}

/// Hands held jobs back without using up an attempt (a runner shutting down
/// before it started them). Arrays `$1` ids, `$2` tokens; returns the ids.
pub(crate) const JOB_RELEASE_MANY: &str = concat!(
    "
    UPDATE jobqueue_jobs AS j
    SET status = CASE WHEN j.cancel_requested THEN 'cancelled' ELSE 'pending' END,
        finished_at = CASE WHEN j.cancel_requested THEN now() ELSE NULL END,
        ",
    given_back!(),
    "
    RETURNING j.id"
);

/// Snoozes held jobs: each goes back to `pending` (or `scheduled`) at
/// `now() + delay` without using up its attempt, its history recording the
/// snooze; a job already snoozed `$4` times fails instead. Arrays `$1`
/// ids, `$2` tokens, `$3` delays in seconds, `$5` whether the job's queue
/// backs off for its delay too (its `backoff_until` moved to at least
/// `now() + delay`: a rate-limited call). A job with a cancel request is
/// cancelled. Returns the ids and new statuses.
pub(crate) const JOB_SNOOZE_MANY: &str = concat!(
    "WITH next AS (
        SELECT j.id, l.delay, j.queue, l.backoff,
               CASE WHEN j.cancel_requested THEN 'cancelled'
                    WHEN j.snoozes >= $4 THEN 'failed'
                    WHEN l.delay <= 0 THEN 'pending'
                    ELSE 'scheduled' END AS next_status,
               CASE WHEN j.snoozes >= $4
                    THEN format('snoozed %s times, the most allowed (max_snoozes %s): gave up \
                                 waiting', j.snoozes + 1, $4)
                    ELSE format('snoozed for %s s (snooze %s of at most %s; no attempt used)',
                                round(l.delay::numeric, 3), j.snoozes + 1, $4) END AS note
        ",
    held_with_delays!(", ($5::bool[])[i] AS backoff"),
    "
    ),
    backoff AS (
        INSERT INTO jobqueue_queues AS c (name, backoff_until)
        SELECT queue, now() + make_interval(secs => max(delay))
        FROM next WHERE backoff
        GROUP BY queue
        ON CONFLICT (name) DO UPDATE
        SET backoff_until = greatest(c.backoff_until, EXCLUDED.backoff_until)
    ),
    ",
    update_by_id!("delay", "note"),
    "
        run_at = CASE WHEN by_id.next_status[width_bucket(j.id, by_id.ids)] IN ('pending', 'scheduled')
                      THEN now() + make_interval(secs => by_id.delay[width_bucket(j.id, by_id.ids)]) ELSE j.run_at END,
        attempts = CASE WHEN by_id.next_status[width_bucket(j.id, by_id.ids)] IN ('pending', 'scheduled')
                        THEN j.attempts - 1 ELSE j.attempts END,
        snoozes = j.snoozes + 1,
        finished_at = CASE WHEN by_id.next_status[width_bucket(j.id, by_id.ids)] IN ('pending', 'scheduled') THEN NULL ELSE now() END,
        worker_id = CASE WHEN by_id.next_status[width_bucket(j.id, by_id.ids)] IN ('pending', 'scheduled') THEN NULL ELSE j.worker_id END,
        started_at = CASE WHEN by_id.next_status[width_bucket(j.id, by_id.ids)] IN ('pending', 'scheduled') THEN NULL ELSE j.started_at END,
        lease_expires_at = NULL,
        last_error = CASE WHEN by_id.next_status[width_bucket(j.id, by_id.ids)] = 'failed' THEN by_id.note[width_bucket(j.id, by_id.ids)] ELSE j.last_error END,
        errors = ",
    push_error!("by_id.note[width_bucket(j.id, by_id.ids)]"),
    "
    FROM by_id
    WHERE j.id = ANY(by_id.ids)
    RETURNING j.id, j.status"
);

/// Sets held jobs aside as `unhandled` without using up an attempt: the
/// claiming runner has no handler for their type. Arrays `$1` ids, `$2`
/// tokens; `$3` names the runner (for the error text). Returns the ids.
pub(crate) const JOB_PARK_MANY: &str = concat!(
    "
    UPDATE jobqueue_jobs AS j
    SET ",
    set_aside!("$3"),
    ",
        ",
    given_back!(),
    "
    RETURNING j.id"
);

/// One range of [`JOB_SET_ASIDE_DUE`]: the due jobs of queue `$1` and type
/// `$2` that also meet `$cond` (SQL), in claim order, locked.
macro_rules! due_of_type {
    ($cond:literal) => {
        concat!(
            "SELECT r.id FROM (
          SELECT p.id FROM jobqueue_jobs AS p
          WHERE p.status = 'pending' AND p.queue = $1 AND p.job_type = $2 AND ",
            $cond,
            "
          ORDER BY p.priority DESC, p.run_at, p.id
          LIMIT $6
          FOR UPDATE SKIP LOCKED) AS r"
        )
    };
}

/// Sets aside as `unhandled` (by runner `$7`) up to `$6` due jobs of queue
/// `$1` and type `$2`, in claim order after the point `$3`, `$4`, `$5`
/// (priority, run_at, id; a null priority: from the queue's start), read
/// in the ranges a resumed claim reads (see `claim_from_ready!`) so that a
/// pass does not step over the entries the passes before it left. Returns
/// the place in the claim order of each job it set aside.
pub(crate) const JOB_SET_ASIDE_DUE: &str = concat!(
    "WITH picked AS (
        SELECT id FROM (",
    due_of_type!("$3::int4 IS NULL"),
    "
            UNION ALL ",
    due_of_type!("p.priority = $3::int4 AND (p.run_at, p.id) > ($4::timestamptz, $5::uuid)"),
    "
            UNION ALL ",
    due_of_type!("p.priority < $3::int4"),
    ") AS ranges
        LIMIT $6
    )
    UPDATE jobqueue_jobs AS j
    SET ",
    set_aside!("$7"),
    "
    WHERE j.id = ANY(ARRAY(SELECT id FROM picked))
    RETURNING j.priority, j.run_at, j.id"
);

/// The end of the statements that move waiting jobs to `pending`: the rows
/// picked (and locked) by the CTE `picked` become `pending`, their queues
/// are woken on channel `$channel`, and the statement returns how many moved.
macro_rules! move_to_pending {
    ($channel:literal) => {
        concat!(
            "moved AS (
        UPDATE jobqueue_jobs AS j
        SET status = 'pending'
        WHERE j.id = ANY(ARRAY(SELECT id FROM picked))
        RETURNING j.queue
    ),
    wake AS (
        SELECT count(pg_notify(",
            $channel,
            ", q.queue)) AS notified
        FROM (SELECT DISTINCT queue FROM moved) AS q
    )
    SELECT count(*) AS n FROM moved, wake"
        )
    };
}

/// The statement that moves up to `$1` scheduled jobs due by `$until` (an
/// SQL expression) to `pending` and wakes their queues on channel `$2`.
/// Safe to run from many processes at once (SKIP LOCKED). Returns the
/// number moved.
macro_rules! promote_due {
    ($until:literal) => {
        concat!(
            "WITH picked AS (
        SELECT id
        FROM jobqueue_jobs
        WHERE status = 'scheduled'
          AND run_at <= ",
            $until,
            "
        ORDER BY run_at
        LIMIT $1
        FOR UPDATE SKIP LOCKED
    ),
    ",
            move_to_pending!("$2")
        )
    };
}

/// Moves up to `$1` scheduled jobs that are due by the database's clock to
/// `pending`: see `promote_due!`.
pub(crate) const JOB_PROMOTE_DUE: &str = promote_due!("now()");

/// Moves up to `$1` scheduled jobs due by time `$3` to `pending`: see
/// `promote_due!`.
pub(crate) const JOB_PROMOTE_DUE_BY: &str = promote_due!("$3");

/// Takes back up to `$3` jobs set aside as `unhandled` whose type is in `$1`
/// and whose queue is in `$2` (an empty array: any queue): back to
/// `pending`, their queues woken on channel `$4`. Returns the number moved.
pub(crate) const JOB_UNPARK: &str = concat!(
    "WITH picked AS (
        SELECT id
        FROM jobqueue_jobs
        WHERE status = 'unhandled'
          AND job_type = ANY($1::text[])
          AND (cardinality($2::text[]) = 0 OR queue = ANY($2::text[]))
        LIMIT $3
        FOR UPDATE SKIP LOCKED
    ),
    ",
    move_to_pending!("$4")
);

/// Recovers up to `$1` held jobs whose lease expired before the database's
/// `now()`: back to `pending` while attempts remain, `failed` ("worker lost")
/// on the last attempt, `cancelled` if a cancel was requested. Safe to run
/// from many processes at once (SKIP LOCKED). Returns id and new status.
pub(crate) const JOB_RESCUE_STALE: &str = concat!(
    "WITH next AS (
        SELECT j.id,
               CASE WHEN j.cancel_requested THEN 'cancelled'
                    WHEN j.attempts >= j.max_attempts THEN 'failed'
                    ELSE 'pending' END AS next_status,
               format('worker lost: lease of worker %s expired at %s (attempt %s of %s)',
                      j.worker_id, j.lease_expires_at, j.attempts, j.max_attempts) AS error
        FROM jobqueue_jobs AS j
        WHERE j.status IN ('claimed', 'running')
          AND j.lease_expires_at < now()
        LIMIT $1
        FOR UPDATE SKIP LOCKED
    ),
    ",
    update_by_id!("error"),
    "
        finished_at = CASE WHEN by_id.next_status[width_bucket(j.id, by_id.ids)] = 'pending' THEN NULL ELSE now() END,
        worker_id = CASE WHEN by_id.next_status[width_bucket(j.id, by_id.ids)] = 'pending' THEN NULL ELSE j.worker_id END,",
    error_by_id!(),
    "
    RETURNING j.id, j.status"
);

/// Deletes up to `$3` jobs in status `$1` finished more than `$2` seconds ago.
pub(crate) const JOB_PRUNE: &str = "
    WITH doomed AS (
        SELECT id
        FROM jobqueue_jobs
        WHERE status = $1
          AND finished_at < now() - make_interval(secs => $2)
        LIMIT $3
        FOR UPDATE SKIP LOCKED
    )
    DELETE FROM jobqueue_jobs AS j
    WHERE j.id = ANY(ARRAY(SELECT id FROM doomed))";

/// Counts live jobs (blocked, waiting, scheduled, pending, unhandled,
/// claimed, running) by job type and status: a type no runner handles
/// shows up as unhandled here.
pub(crate) const JOB_STATS_BY_TYPE: &str = "
    SELECT job_type, 'blocked' AS status, count(*) AS jobs
    FROM jobqueue_jobs WHERE status = 'blocked' GROUP BY job_type
    UNION ALL
    SELECT job_type, 'waiting', count(*) AS jobs
    FROM jobqueue_jobs WHERE status = 'waiting' GROUP BY job_type
    UNION ALL
    SELECT job_type, 'pending', count(*) AS jobs
    FROM jobqueue_jobs WHERE status = 'pending' GROUP BY job_type
    UNION ALL
    SELECT job_type, 'scheduled', count(*)
    FROM jobqueue_jobs WHERE status = 'scheduled' GROUP BY job_type
    UNION ALL
    SELECT job_type, 'unhandled', count(*)
    FROM jobqueue_jobs WHERE status = 'unhandled' GROUP BY job_type
    UNION ALL
    SELECT job_type, status, count(*)
    FROM jobqueue_jobs WHERE lease_expires_at IS NOT NULL GROUP BY job_type, status
    ORDER BY job_type, status";

/// Dead row versions in `jobqueue_jobs`, from the statistics views.
pub(crate) const JOB_DEAD_TUPLES: &str = "
    SELECT coalesce(n_dead_tup, 0) AS dead
    FROM pg_stat_user_tables
    WHERE relid = 'jobqueue_jobs'::regclass";

/// Vacuums the jobs table, unless another session already is, leaving the
/// empty pages at its end in place.
pub(crate) const JOB_VACUUM: &str = "VACUUM (SKIP_LOCKED, TRUNCATE false) jobqueue_jobs";

/// [`JOB_VACUUM`] that also gives the empty pages at the table's end back
/// to the file system, under an `ACCESS EXCLUSIVE` lock of the table.
pub(crate) const JOB_VACUUM_TRUNCATE: &str = "VACUUM (SKIP_LOCKED, TRUNCATE true) jobqueue_jobs";

/// Reads one job by id.
pub(crate) const JOB_GET: &str = "SELECT * FROM jobqueue_jobs WHERE id = $1";

/// Reads the status of one job by id.
pub(crate) const JOB_GET_STATUS: &str = "SELECT status FROM jobqueue_jobs WHERE id = $1";

/// Puts the finished jobs `j` for which `$where` holds back to `pending`
/// (a keyed job of a queue with a key limit: `waiting`, for its key to
/// admit it), due now, with their attempts reset (their error history is
/// kept), and wakes their queues on the channel bound as `$channel`. A job whose
/// unique key is held by a live job meanwhile is left alone, and of jobs
/// that share a unique key only the newest is requeued (a second would
/// break the key's uniqueness, and the whole statement with it). A workflow
/// step goes back to `blocked` while a step it comes after has not
/// settled, and its step is `live` again (its end is settled anew).
/// Returns the ids requeued.
///
/// The step rows are locked first (CTE `step`, in id order, as a
/// completion's count-down locks them), and the choice between `blocked`
/// and due is made from the locked row: a completion of the last parent
/// that committed while this statement waited has counted the step down
/// to 0, and the step is due; one that waits for this statement's lock
/// counts down after it, and releases the step it finds `blocked` (see
/// `release_children!`). Read from the statement's snapshot instead, a
/// count-down committed meanwhile would leave the step `blocked` with no
/// parent left to release it.
macro_rules! requeue_where {
    ($where:literal, $channel:literal) => {
        concat!(
            "WITH candidate AS MATERIALIZED (
                SELECT DISTINCT ON (coalesce(j.unique_key, j.id::text)) j.id
                FROM jobqueue_jobs AS j
                WHERE ",
            $where,
            "
                  AND (j.unique_key IS NULL OR NOT EXISTS (
                        SELECT 1 FROM jobqueue_jobs AS live
                        WHERE live.unique_key = j.unique_key
                          AND live.status IN ('waiting', 'scheduled', 'pending', 'unhandled',
                                              'claimed', 'running')))
                ORDER BY coalesce(j.unique_key, j.id::text), j.id DESC
            ),
            step AS MATERIALIZED (
                SELECT ws.job_id, ws.parents_left, ws.state
                FROM jobqueue_workflow_steps AS ws
                WHERE ws.job_id IN (SELECT id FROM candidate)
                ORDER BY ws.job_id
                FOR UPDATE
            ),
            requeued AS (
                UPDATE jobqueue_jobs AS j
                SET status = CASE WHEN step.parents_left > 0 THEN 'blocked' ELSE ",
            status_for_keyed!("now()", "j.queue", "j.concurrency_key"),
            " END,
                    key_checked = NULL,
                    run_at = now(),
                    attempts = 0,
                    finished_at = NULL,
                    worker_id = NULL,
                    lease_expires_at = NULL,
                    cancel_requested = false,
                    progress = 0,
                    current_stage = NULL
                FROM candidate LEFT JOIN step ON step.job_id = candidate.id
                WHERE j.id = candidate.id AND ",
            $where,
            "
                RETURNING j.id, j.queue, j.status, step.state AS step_state
            ),
            revived AS (
                UPDATE jobqueue_workflow_steps AS ws
                SET state = 'live', ended_at = NULL
                FROM requeued
                WHERE ws.job_id = requeued.id AND requeued.step_state <> 'live'
            ),
            ",
            wake_queues_of!("requeued", $channel),
            "
            SELECT requeued.id FROM requeued, wake"
        )
    };
}

/// Puts job `$1` back to `pending` if it is failed or cancelled (see
/// `requeue_where`); `$2` notify channel.
pub(crate) const JOB_RETRY: &str =
    requeue_where!("j.id = $1 AND j.status IN ('failed', 'cancelled')", "$2");

/// Puts the failed jobs of queue `$1` and type `$2` (each: any if null)
/// back to `pending` (see `requeue_where`); `$3` notify channel.
pub(crate) const JOB_RETRY_FAILED: &str = requeue_where!(
    "j.status = 'failed'
     AND ($1::text IS NULL OR j.queue = $1)
     AND ($2::text IS NULL OR j.job_type = $2)",
    "$3"
);

/// The filters of a job list: status `$1`, queue `$2`, type `$3`, the
/// live job holding unique key `$4` (each: any if null; a key is looked up
/// in the unique-key index, which holds live jobs only). Bound as values,
/// the planner folds the null ones away before it plans.
macro_rules! job_filters {
    () => {
        concat!(
            "($1::text IS NULL OR status = $1)
             AND ($2::text IS NULL OR queue = $2)
             AND ($3::text IS NULL OR job_type = $3)
             AND ($4::text IS NULL OR (unique_key = $4 AND ",
            live_predicate!(),
            "))"
        )
    };
}

/// A page of jobs newest first (see `job_filters`), below id `$5` and at
/// or above id `$7` (each: no bound if null), at most `$6`.
pub(crate) const JOB_BROWSE_NEWEST: &str = concat!(
    "SELECT * FROM jobqueue_jobs WHERE ",
    job_filters!(),
    " AND ($5::uuid IS NULL OR id < $5)
     AND ($7::uuid IS NULL OR id >= $7)
     ORDER BY id DESC
     LIMIT $6"
);

/// The id `$2` jobs below id `$1` (no bound if null), newest first: the
/// floor of a search window of that many jobs (none if fewer are left).
pub(crate) const JOB_WINDOW_FLOOR: &str = "
    SELECT id FROM jobqueue_jobs
    WHERE $1::uuid IS NULL OR id < $1
    ORDER BY id DESC
    OFFSET $2 - 1
    LIMIT 1";

/// A page of jobs by `run_at` (see `job_filters`; a live status), after
/// (`$5`, `$6`) if not null, at most `$7`.
pub(crate) const JOB_BROWSE_RUN_AT: &str = concat!(
    "SELECT * FROM jobqueue_jobs WHERE ",
    job_filters!(),
    " AND ($5::timestamptz IS NULL OR (run_at, id) > ($5, $6::uuid))
     ORDER BY run_at, id
     LIMIT $7"
);

/// A page of finished jobs by when they finished, latest first (see
/// `job_filters`; a finished status), before (`$5`, `$6`) if not null, at
/// most `$7`.
pub(crate) const JOB_BROWSE_FINISHED: &str = concat!(
    "SELECT * FROM jobqueue_jobs WHERE ",
    job_filters!(),
    " AND ($5::timestamptz IS NULL OR (finished_at, id) < ($5, $6::uuid))
     ORDER BY finished_at DESC, id DESC
     LIMIT $7"
);

/// How many jobs match the filters (see `job_filters`) at or above id `$6`
/// (no bound if null), counting at most `$5`.
pub(crate) const JOB_COUNT_BOUNDED: &str = concat!(
    "SELECT count(*) AS n FROM (SELECT 1 FROM jobqueue_jobs WHERE ",
    job_filters!(),
    " AND ($6::uuid IS NULL OR id >= $6) LIMIT $5) AS bounded"
);

/// Deletes job `$1` if it is finished.
pub(crate) const JOB_DELETE_FINISHED: &str = "
    DELETE FROM jobqueue_jobs
    WHERE id = $1 AND status IN ('completed', 'failed', 'cancelled')";

/// Finished, completed and failed jobs per minute over the last hour:
/// completed ones from their counts (`jobqueue_completions`, whether their
/// rows are kept or not), failed and cancelled ones from the latest `$1` of
/// their rows at most (the pruning index, newest first).
pub(crate) const JOB_THROUGHPUT: &str = "
    WITH ended AS (
        SELECT date_trunc('minute', finished_at) AS minute,
               count(*) AS n,
               count(*) FILTER (WHERE status = 'failed') AS failed
        FROM (
            SELECT finished_at, status FROM jobqueue_jobs
            WHERE status IN ('failed', 'cancelled')
              AND finished_at >= date_trunc('minute', now() - interval '1 hour')
            ORDER BY finished_at DESC
            LIMIT $1
        ) AS latest
        GROUP BY 1
    ), completed AS (
        SELECT minute, sum(completed)::int8 AS n
        FROM jobqueue_completions
        WHERE minute >= date_trunc('minute', now() - interval '1 hour')
        GROUP BY 1
    )
    SELECT minute,
           coalesce(c.n, 0) + coalesce(e.n, 0) AS finished,
           coalesce(c.n, 0) AS completed,
           coalesce(e.failed, 0) AS failed
    FROM ended AS e
    FULL JOIN completed AS c USING (minute)
    ORDER BY minute";

// The hot-path statements, run prepared (see `prepared.rs`).
crate::prepared::statements! {
    JobInsert => JOB_INSERT,
    JobInsertQuiet => JOB_INSERT_QUIET,
    JobInsertMany => JOB_INSERT_MANY,
    JobLiveHolders => JOB_LIVE_HOLDERS,
    JobClaimQueues => JOB_CLAIM_QUEUES,
    JobClaimAny => JOB_CLAIM_ANY,
    JobClaimQueuesLimited => JOB_CLAIM_QUEUES_LIMITED,
    JobClaimAnyLimited => JOB_CLAIM_ANY_LIMITED,
    JobStartMany => JOB_START_MANY,
    JobCompleteMany => JOB_COMPLETE_MANY,
    JobCompleteDeleteMany => JOB_COMPLETE_DELETE_MANY,
    JobCompleteStepsMany => JOB_COMPLETE_STEPS_MANY,
    JobCompleteDeleteStepsMany => JOB_COMPLETE_DELETE_STEPS_MANY,
    JobFailMany => JOB_FAIL_MANY,
    JobReleaseMany => JOB_RELEASE_MANY,
    JobParkMany => JOB_PARK_MANY,
    JobSnoozeMany => JOB_SNOOZE_MANY,
    JobCancelHeldMany => JOB_CANCEL_HELD_MANY,
    JobHeartbeatMany => JOB_HEARTBEAT_MANY,
}

/// The indexes named in `$1` (in that order, those that exist): size on
/// disk, entries by the planner's estimate (`reltuples`, as the last
/// vacuum, analyze or build left it; -1 when none has), whether valid, the
/// width of a key (fixed-length columns at their length, others at their
/// average width by the table's statistics, 32 bytes without), the block
/// size, and the statement that rebuilds it without blocking writes,
/// schema-qualified and quoted by the server (`format('%I')`).
pub(crate) const JOB_INDEX_SIZES: &str = "
    SELECT c.relname::text AS name,
           pg_relation_size(c.oid) AS bytes,
           c.reltuples::float8 AS entries,
           i.indisvalid AS valid,
           (SELECT coalesce(sum(CASE WHEN a.attlen > 0 THEN a.attlen
                                     ELSE coalesce(s.avg_width, 32) END), 0)
            FROM pg_attribute AS a
            LEFT JOIN pg_stats AS s
                   ON s.schemaname = n.nspname AND s.tablename = t.relname
                  AND s.attname = a.attname
            WHERE a.attrelid = c.oid AND a.attnum > 0)::int8 AS key_bytes,
           current_setting('block_size')::int8 AS block_bytes,
           format('REINDEX INDEX CONCURRENTLY %I.%I', n.nspname, c.relname) AS rebuild
    FROM unnest($1::text[]) WITH ORDINALITY AS wanted (name, ord)
    JOIN pg_class AS c ON c.oid = to_regclass(wanted.name)
    JOIN pg_index AS i ON i.indexrelid = c.oid
    JOIN pg_class AS t ON t.oid = i.indrelid
    JOIN pg_namespace AS n ON n.oid = t.relnamespace
    ORDER BY wanted.ord";

/// What an interrupted `REINDEX INDEX CONCURRENTLY` of the jobs table's
/// indexes left behind: invalid indexes named `<index>_ccnew` (the copy
/// being built) or `<index>_ccold` (the original, after the swap), while
/// no index of the table is being built; with the statement that drops
/// each, quoted by the server.
pub(crate) const JOB_INDEX_LEFTOVERS: &str = "
    SELECT c.relname::text AS name,
           format('DROP INDEX CONCURRENTLY %I.%I', n.nspname, c.relname) AS statement
    FROM pg_index AS i
    JOIN pg_class AS c ON c.oid = i.indexrelid
    JOIN pg_namespace AS n ON n.oid = c.relnamespace
    WHERE i.indrelid = 'jobqueue_jobs'::regclass
      AND NOT i.indisvalid
      AND c.relname ~ '_cc(new|old)[0-9]*$'
      AND NOT EXISTS (SELECT 1 FROM pg_stat_progress_create_index AS p
                      WHERE p.relid = i.indrelid)
    ORDER BY c.relname";

/// Takes, for this session until [`JOB_INDEX_UPKEEP_UNLOCK`], the advisory
/// lock that lets one runner at a time rebuild the jobs table's indexes;
/// false if another session holds it. The key is the ASCII of `jqreindx`,
/// a number no other jobqueue lock uses.
pub(crate) const JOB_INDEX_UPKEEP_LOCK: &str =
    "SELECT pg_try_advisory_lock(7670037420274771064) AS locked";

/// Releases [`JOB_INDEX_UPKEEP_LOCK`].
pub(crate) const JOB_INDEX_UPKEEP_UNLOCK: &str =
    "SELECT pg_advisory_unlock(7670037420274771064) AS locked";

/// The limits of a rebuild, set on the session before it (a rebuild runs
/// outside any transaction, so `SET LOCAL` would not hold): how long it
/// waits for a lock, or for the transactions it must outlast (each a lock
/// wait), and how long it may run in all.
pub(crate) const JOB_INDEX_REBUILD_LIMITS: &str =
    "SET lock_timeout = '10s'; SET statement_timeout = '30min'";

/// Puts the session's limits back after a rebuild.
pub(crate) const JOB_INDEX_REBUILD_UNLIMIT: &str = "RESET lock_timeout; RESET statement_timeout";
