//! Claiming: the claim of given queues and the claim of any queue, each
//! plain or honouring global and rate limits, and the heads of queues.
//! Each claim is one statement: the shared fragments (`claim_from_ready!`,
//! `lock_limited!`, `note_limited!`) are assembled below, and
//! `sql/expanded/jobs/claim.sql` shows every claim whole.

/// One range of a queue's part in `claim_from_ready!`, as `$name`: the
/// `pending` jobs of `quota.queue` that also meet `$cond` (SQL), in claim
/// order (`jobqueue_jobs_fetch_idx`), at most the queue's quota, locked;
/// none of a type in `$15` (handled by another live runner, not by this
/// claimer: left for that runner, neither claimed nor set aside).
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
                      AND (cardinality($15::text[]) = 0 OR p.job_type <> ALL($15::text[]))
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
/// (`name`, `room`, `rated`): the limited queues whose `jobqueue_queues` row this
/// statement locked (`lock_limited!`), each capped at the room its limits
/// leave, so that concurrent claims never take more than the limits
/// together. A claimed job's `claimed_at` is the claim statement's time: a
/// rate-limited queue's starts are counted by it. A queue's part is
/// `$quota` (SQL on `share.n`, the even share, and `ready`): `plain_quota!`
/// or, in a claim that honours limits, `rated_quota!`. `$5`/`$6` (names,
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
    ($now:literal, $quota:expr) => {
        concat!(
            "ready AS (
            SELECT f.queue, f.after_priority, f.after_run_at, f.after_id,
                   least($2::int8, r.room, l.room) AS room, coalesce(l.rated, false) AS rated
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
                   ",
            $quota,
            " AS n
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

/// A queue's part of a claim that locks no queue: its even share, within
/// its room.
macro_rules! plain_quota {
    () => {
        "least(share.n, ready.room)"
    };
}

/// A queue's part of a claim that honours limits: as `plain_quota!`, but
/// the queues with a rate limit (`rated` in `limited`) share `$14` (when
/// not null: what the claimer's workers start at once) between them, in
/// the order the claim reaches them (after `$11` first, for a claim of
/// every queue): a claim that reaches many rate-limited queues takes from
/// them no job its workers could not start at once, which would start late
/// and be handed back with its start counted. (A window over `ready`: the
/// claims that lock no queue leave it out.)
macro_rules! rated_quota {
    () => {
        "CASE WHEN ready.rated AND $14::int8 IS NOT NULL
                        THEN least(share.n, ready.room,
                                   greatest($14::int8 - coalesce(sum(least(share.n, ready.room))
                                       FILTER (WHERE ready.rated)
                                       OVER (ORDER BY ready.queue <= $11::text, ready.queue
                                             ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING),
                                       0), 0))
                        ELSE least(share.n, ready.room)
                   END"
    };
}

/// No queue locked by the claim (`claim_from_ready!`'s CTE `limited`
/// empty): the claim leaves out every queue with a global limit or a rate
/// limit.
macro_rules! none_limited {
    () => {
        "limited AS (SELECT NULL::text AS name, NULL::int8 AS room, NULL::bool AS rated WHERE false)"
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
/// `limited` (`name`, `room`, `rated`: whether it has a rate limit), the queues with a global limit or a rate
/// limit among those the claim found (`found`: the named queues with due
/// jobs, or the queues the walk of every queue reached), each with
/// the room its limits leave this claim (the lesser of the two rooms below;
/// `least` passes over the null of a queue without a rate limit).
///
/// `locked` locks their `jobqueue_queues` rows, in name order, for the
/// rest of the transaction, and no other limited queue's: claims of a
/// limited queue take turns, a claim never waits for a queue it does not
/// take from, and a
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
          AND c.name = ANY(ARRAY(SELECT f.queue FROM found AS f))
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
        SELECT u.name, least(u.held_room, u.rate_room, u.start_room) AS room,
               u.rate_starts IS NOT NULL AS rated
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
/// `$16` (microseconds, 0 for none) is how much later than the margin the
/// claimer's handlers may start: the time its claims take to come back and
/// reach a worker. The claim's entry is kept that much later, so its starts
/// count that much longer, and its jobs' margins grow by as much: a runner
/// whose claims take longer than the margin (a loaded machine, a debug
/// build) still has its handlers start within what the window counts,
/// instead of handing every job back as late (its start counted each
/// time) and never draining a limit that binds.
///
/// `took` counts the claimed jobs of each queue, then keeps the locked
/// queues' counts: counted after the join, a claim of a thousand jobs from
/// a hundred queues compared every job with every queue (the planner,
/// which cannot see how many rows a CTE holds, joins them in a nested
/// loop), a third of the claim's time.
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
        SELECT j.queue, j.n
        FROM (SELECT queue, count(*)::int4 AS n FROM claimed GROUP BY queue) AS j
        JOIN limited AS l ON l.name = j.queue
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
                                     + greatest($16::int8, 0) AS now,
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
                                   * 1000000)::int8 + greatest($16::int8, 0)
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
/// queues it locked), `$now` and `$quota` for `claim_from_ready!`, and
/// `$end` (SQL: what it returns) after it.
macro_rules! claim_queues {
    ($limited:expr, $now:literal, $quota:expr, $end:expr) => {
        concat!(
            "WITH named AS (
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
            $limited,
            ",
    ",
            claim_from_ready!($now, $quota),
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
pub(crate) const JOB_CLAIM_QUEUES: &str = claim_queues!(
    none_limited!(),
    "statement_timestamp()",
    plain_quota!(),
    claimed_rows!()
);

/// [`JOB_CLAIM_QUEUES`], honouring global and rate limits: locks the
/// limited queues' rows first and notes what it took from them
/// (`lock_limited!`, `note_limited!`).
pub(crate) const JOB_CLAIM_QUEUES_LIMITED: &str = claim_queues!(
    lock_limited!(),
    "(SELECT now FROM clock)",
    rated_quota!(),
    note_limited!()
);

/// Whether queue `$q` (an SQL expression) may be claimed from, as the walk
/// of every queue decides before it locks anything: not paused, not backed
/// off, not capped at zero (`$5`/`$6`), and, if it has a global limit or a
/// rate limit, `$limited_ok` (SQL on its row `c`). `ready` in
/// `claim_from_ready!` decides again, under the locks.
macro_rules! claimable {
    ($q:literal, $limited_ok:expr) => {
        concat!(
            "(NOT EXISTS (SELECT 1 FROM jobqueue_queues AS c
                         WHERE c.name = ",
            $q,
            "
                           AND (c.paused OR coalesce(c.backoff_until > now(), false)
                                OR ((c.global_limit IS NOT NULL OR c.rate_starts IS NOT NULL)
                                    AND NOT ",
            $limited_ok,
            ")))
              AND coalesce((SELECT r.room FROM unnest($5::text[], $6::int8[]) AS r(queue, room)
                            WHERE r.queue = ",
            $q,
            " LIMIT 1), 1) > 0)"
        )
    };
}

/// Whether the limited queue of row `c` may have room, read without its
/// lock, as the walk of a claim that honours limits tests it: its rate
/// window holds fewer starts than its limit at the clock's time (a claim
/// committed since this statement's snapshot only takes room away, and
/// the claim checks again under the lock); a global limit always (its
/// bound is checked, and recounted, under the lock).
macro_rules! may_have_room {
    () => {
        concat!(
            "(c.rate_starts IS NULL
              OR c.rate_starts > (SELECT coalesce(sum(n), 0)
                                  FROM unnest(c.rate_jobs[width_bucket(clock_timestamp() - ",
            rate_span!("c"),
            ", c.rate_at) + 1:]) AS n))"
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
    ($name:literal, $from:literal, $bound:literal, $counted:literal, $limited_ok:expr) => {
        concat!(
            $name,
            " AS (
        SELECT first.queue,
               ",
            $counted,
            " + CASE WHEN first.queue IS NOT NULL AND ",
            claimable!("first.queue", $limited_ok),
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
            claimable!("next.queue", $limited_ok),
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

/// The claim of every queue, with `$limited`, `$now`, `$quota` and `$end`
/// as in `claim_queues!`, and `$limited_ok` as the walk tests a limited
/// queue (`claimable!`).
macro_rules! claim_any {
    ($limited:expr, $limited_ok:expr, $now:literal, $quota:expr, $end:expr) => {
        concat!(
            "WITH RECURSIVE ",
            walk_queues!("after_start", "$11::text", "true", "0", $limited_ok),
            ",
    ",
            walk_queues!(
                "wrapped",
                "''",
                "p.queue <= $11::text",
                "(SELECT coalesce(max(a.n), 0) FROM after_start AS a)",
                $limited_ok
            ),
            ",
    found AS (
        SELECT queue, NULL::int4 AS after_priority, NULL::timestamptz AS after_run_at,
               NULL::uuid AS after_id
        FROM (SELECT queue FROM after_start UNION ALL SELECT queue FROM wrapped) AS walked
        WHERE queue IS NOT NULL
    ),
    ",
            $limited,
            ",
    ",
            claim_from_ready!($now, $quota),
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
/// any queue, and there are no resume points (`$7` to `$10` go unused),
/// so every claim binds the same parameters.
pub(crate) const JOB_CLAIM_ANY: &str = claim_any!(
    none_limited!(),
    "false",
    "statement_timestamp()",
    plain_quota!(),
    claimed_rows!()
);

/// [`JOB_CLAIM_ANY`], honouring global and rate limits, as
/// [`JOB_CLAIM_QUEUES_LIMITED`] does. The walk counts a limited queue as
/// one it may claim from when its row, read without a lock, leaves it
/// room (`may_have_room!`), and the claim then locks the rows of the
/// limited queues the walk reached, and of no other: with a thousand
/// rate-limited queues, a claim of 32 jobs locks at most 32 rows, not a
/// thousand, and claims that walk different queues never wait for each
/// other.
pub(crate) const JOB_CLAIM_ANY_LIMITED: &str = claim_any!(
    lock_limited!(),
    may_have_room!(),
    "(SELECT now FROM clock)",
    rated_quota!(),
    note_limited!()
);

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
