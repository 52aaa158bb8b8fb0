//! The admission of keyed jobs: the statements that move `waiting` jobs
//! (keyed jobs of a queue with a key limit, see the `concurrency_keys`
//! migration) to `pending` when their key has room.
//!
//! A key's "holders" are its jobs in the live statuses other than
//! `waiting` (`key_holders!`): admitted and not finished. An admission
//! of a queue's keys runs in a transaction of its own that first takes the
//! queue's advisory lock ([`KEY_LOCK_QUEUES`]) and then, in a second
//! statement (whose snapshot sees every admission committed before the
//! lock was granted), counts each key's holders and admits its oldest
//! waiting jobs up to the limit ([`KEY_ADMIT`]). Admissions of one queue
//! thus never overlap, and a key never has more holders than its limit
//! (unless the limit was lowered, or set while more were live).
//!
//! Which waiting jobs a pass must look at: those no admission looked at
//! yet (`key_checked` not true, [`KEY_NEW`]) — new jobs at the head of
//! their key's line (an insert marks a job behind a due job of its key as
//! looked at: the one ahead is admitted first, and the admission that
//! admits it reads the rest of the line), and jobs that came due — and,
//! after a job of a key finished, that key's line ([`KEY_WITH_WAITING`]).
//! A sweep of every key ([`KEY_SWEEP`]) finds the room nothing announced.
//!
//! What the statements rely on: `jobqueue_jobs_key_waiting_idx` (`queue,
//! concurrency_key, id` of the waiting jobs: a key's line, and the keys
//! with waiting jobs), `jobqueue_jobs_key_held_idx` (`queue,
//! concurrency_key` of the holders) and `jobqueue_jobs_key_new_idx`
//! (`run_at` of the waiting jobs no admission looked at yet).

/// The advisory-lock class of the admissions of a queue (the second key is
/// `hashtext` of the queue's name): the ASCII of `jqky`, a number no other
/// jobqueue lock uses. Two-key advisory locks never meet an application's
/// one-key (`bigint`) locks.
macro_rules! admission_lock_class {
    () => {
        "1785817977"
    };
}

/// The holders of key `$key` of queue `$queue` (SQL expressions): its jobs
/// admitted and not finished.
macro_rules! key_holders {
    ($queue:literal, $key:literal) => {
        concat!(
            "(SELECT count(*) FROM jobqueue_jobs AS h
              WHERE h.queue = ",
            $queue,
            " AND h.concurrency_key = ",
            $key,
            "
                AND h.concurrency_key IS NOT NULL
                AND h.status IN ('scheduled', 'pending', 'unhandled', 'claimed', 'running'))"
        )
    };
}

/// Takes, until the end of the transaction, the admission lock of each
/// queue in `$1`, in name order (so two admissions never wait on each
/// other in a circle).
pub(crate) const KEY_LOCK_QUEUES: &str = concat!(
    "SELECT count(pg_advisory_xact_lock(",
    admission_lock_class!(),
    ", hashtext(q.queue)))::int8 AS n
    FROM (SELECT DISTINCT queue FROM unnest($1::text[]) AS a(queue) ORDER BY queue) AS q"
);

/// Whether row `j` is (still) `waiting`, written so that the planner
/// cannot read it as the predicate of the waiting jobs' partial indexes:
/// the statements that write jobs by id go through the primary key, never
/// through a walk of a partial index that statistics taken before the
/// jobs were inserted call small (see `jobs.rs`).
macro_rules! still_waiting {
    () => {
        "(CASE WHEN j.status = 'waiting' THEN true END)"
    };
}

/// Admits, for each key of arrays `$1` (queues) and `$2` (keys), its
/// oldest waiting jobs (by id: enqueue order) up to its queue's key limit
/// less its holders; all of them when the queue has no key limit (any
/// more: it was removed). An ordered queue admits the head of each key's
/// line whatever its `run_at` (the jobs behind it wait for it); another
/// only the due ones. An admitted job becomes `pending`, or `scheduled`
/// while its `run_at` is ahead. Wakes the queues that got due jobs on
/// channel `$3`. Run after [`KEY_LOCK_QUEUES`] of the queues, in the same
/// transaction. Returns how many jobs it admitted.
pub(crate) const KEY_ADMIT: &str = concat!(
    "WITH asked AS (
        SELECT DISTINCT a.queue, a.key FROM unnest($1::text[], $2::text[]) AS a(queue, key)
    ),
    room AS (
        SELECT asked.queue, asked.key, coalesce(c.key_ordered, false) AS ordered,
               CASE WHEN c.key_limit IS NULL THEN 2147483647
                    ELSE c.key_limit - ",
    key_holders!("asked.queue", "asked.key"),
    " END AS n
        FROM asked
        LEFT JOIN jobqueue_queues AS c ON c.name = asked.queue
    ),
    picked AS (
        SELECT w.id
        FROM room
        CROSS JOIN LATERAL (
            SELECT w.id FROM jobqueue_jobs AS w
            WHERE w.status = 'waiting' AND w.queue = room.queue AND w.concurrency_key = room.key
              AND (room.ordered OR w.run_at <= now())
            ORDER BY w.id
            LIMIT greatest(room.n, 0)
        ) AS w
    ),
    admitted AS (
        UPDATE jobqueue_jobs AS j
        SET status = CASE WHEN j.run_at <= now() THEN 'pending' ELSE 'scheduled' END,
            key_checked = NULL
        WHERE j.id = ANY(ARRAY(SELECT id FROM picked)) AND ",
    still_waiting!(),
    "
        RETURNING j.queue, j.status
    ),
    wake AS (
        SELECT count(pg_notify($3, q.queue)) AS notified
        FROM (SELECT DISTINCT queue FROM admitted WHERE status = 'pending') AS q
    )
    SELECT count(*)::int8 AS n FROM admitted, wake"
);

/// Marks the jobs of `$1` (ids) still waiting as looked at by an
/// admission (`key_checked`): after [`KEY_ADMIT`] of their keys, in the
/// same transaction, so the jobs it admitted are no longer waiting.
pub(crate) const KEY_MARK_CHECKED: &str = concat!(
    "UPDATE jobqueue_jobs AS j SET key_checked = true
    WHERE j.id = ANY($1::uuid[]) AND ",
    still_waiting!()
);

/// The keys of arrays `$1` (queues) and `$2` (keys) that have waiting
/// jobs, each once: `queue`, `key`. Read without the admission lock: a job
/// that starts waiting after this read is new, and an admission pass of
/// new jobs looks at it. One probe of a key's line per key (a `LATERAL`
/// with a limit, which the planner cannot turn into a join that reads
/// every waiting job, as it would with statistics that call the table
/// empty).
pub(crate) const KEY_WITH_WAITING: &str = "
    SELECT a.queue, a.key
    FROM (SELECT DISTINCT queue, key FROM unnest($1::text[], $2::text[]) AS u(queue, key)) AS a
    CROSS JOIN LATERAL (
        SELECT 1 FROM jobqueue_jobs AS w
        WHERE w.status = 'waiting' AND w.queue = a.queue AND w.concurrency_key = a.key
        LIMIT 1
    ) AS line";

/// Whether queue row `$c` (of `jobqueue_queues`) lets a runner claim its
/// waiting keyed jobs straight from their keys' lines (see
/// [`KEY_CLAIM`]): it has a key limit without order (an ordered queue's
/// heads are admitted, whatever their `run_at`), and nothing the claim
/// statement checks stands in the way: not paused, not backed off, no
/// global or rate limit.
macro_rules! claims_waiting {
    ($c:literal) => {
        concat!(
            "(",
            $c,
            ".key_limit IS NOT NULL AND ",
            $c,
            ".key_ordered IS NOT TRUE AND ",
            $c,
            ".paused IS NOT TRUE AND ",
            $c,
            ".global_limit IS NULL AND ",
            $c,
            ".rate_starts IS NULL AND NOT coalesce(",
            $c,
            ".backoff_until > now(), false))"
        )
    };
}

/// Whether waiting job `w` is one a runner's [`KEY_CLAIM_HEADS`] takes,
/// for a runner handling the job types in `$types` (every type if empty)
/// that leaves out the queues in `$capped` (SQL expressions).
macro_rules! claimable_waiting {
    ($types:literal, $capped:literal) => {
        concat!(
            "(NOT w.queue = ANY(",
            $capped,
            ")
              AND (cardinality(",
            $types,
            ") = 0 OR w.job_type = ANY(",
            $types,
            "))
              AND EXISTS (SELECT 1 FROM jobqueue_queues AS c
                          WHERE c.name = w.queue AND ",
            claims_waiting!("c"),
            "))"
        )
    };
}

/// Up to `$2` waiting jobs no admission looked at yet that are due, of the
/// queues in `$1` (every queue if empty), soonest due first: `id`,
/// `queue`, `key`. When `$3`, without the jobs a runner handling the job
/// types in `$4` that leaves out the queues in `$5` claims straight from
/// their lines ([`KEY_CLAIM_HEADS`]).
pub(crate) const KEY_NEW: &str = concat!(
    "SELECT w.id, w.queue, w.concurrency_key AS key
    FROM jobqueue_jobs AS w
    WHERE w.status = 'waiting' AND w.key_checked IS NOT TRUE AND w.run_at <= now()
      AND (cardinality($1::text[]) = 0 OR w.queue = ANY($1::text[]))
      AND NOT ($3::bool AND ",
    claimable_waiting!("$4::text[]", "$5::text[]"),
    ")
    ORDER BY w.run_at
    LIMIT $2"
);

/// The keys with waiting jobs, of the queues in `$3` (every queue if
/// empty), after key `$2` of queue `$1` (from the first if `$1` is null),
/// at most `$4`, in (queue, key) order: `queue`, `key`, and whether the
/// key has room (fewer holders than its queue's key limit, or no limit)
/// that this sweep is for: a key with a due waiting job no admission
/// looked at yet is left to the pass of such jobs ([`KEY_NEW`]) or a
/// runner's claim of them ([`KEY_CLAIM_HEADS`]), which take its line.
pub(crate) const KEY_SWEEP: &str = concat!(
    "WITH keys AS (
        SELECT queue, concurrency_key AS key
        FROM jobqueue_jobs
        WHERE status = 'waiting'
          AND ($1::text IS NULL OR (queue, concurrency_key) > ($1::text, $2::text))
          AND (cardinality($3::text[]) = 0 OR queue = ANY($3::text[]))
        GROUP BY queue, concurrency_key
        ORDER BY queue, concurrency_key
        LIMIT $4
    )
    SELECT k.queue, k.key,
           (c.key_limit IS NULL OR c.key_limit > ",
    key_holders!("k.queue", "k.key"),
    "
            AND NOT EXISTS (SELECT 1 FROM jobqueue_jobs AS u
                            WHERE u.status = 'waiting' AND u.queue = k.queue
                              AND u.concurrency_key = k.key
                              AND u.key_checked IS NOT TRUE AND u.run_at <= now())) AS has_room
    FROM keys AS k
    LEFT JOIN jobqueue_queues AS c ON c.name = k.queue
    ORDER BY k.queue, k.key"
);

/// The keys of queue `$1` with waiting jobs (`queue`, `key`): what a
/// change of its key limit admits from.
pub(crate) const KEY_WAITING_OF_QUEUE: &str = "
    SELECT DISTINCT queue, concurrency_key AS key
    FROM jobqueue_jobs
    WHERE status = 'waiting' AND queue = $1";

/// Up to `$4` due waiting jobs no admission looked at yet (the heads of
/// their keys' lines, as [`KEY_NEW`] reads them) that a runner may claim
/// straight away: of the queues in `$1` (every queue if empty) but not in
/// `$2`, of the job types in `$3` (every type if empty), in a queue that
/// `claims_waiting!`; soonest due first: `id`, `queue`, `key`. Read
/// without a lock: [`KEY_CLAIM`] decides under it.
pub(crate) const KEY_CLAIM_HEADS: &str = concat!(
    "SELECT w.id, w.queue, w.concurrency_key AS key
    FROM jobqueue_jobs AS w
    WHERE w.status = 'waiting' AND w.key_checked IS NOT TRUE AND w.run_at <= now()
      AND (cardinality($1::text[]) = 0 OR w.queue = ANY($1::text[]))
      AND ",
    claimable_waiting!("$3::text[]", "$2::text[]"),
    "
    ORDER BY w.run_at
    LIMIT $4"
);

/// Claims waiting jobs straight from their keys' lines, as an admission
/// followed by a claim would but with one write per job: for the heads
/// `$1` (ids) of keys `$2` (queues), `$3` (keys), in that order (from
/// [`KEY_CLAIM_HEADS`]), each key's oldest due waiting jobs up to its
/// queue's key limit less its holders, at most `$4` in all: those of the
/// types in `$7` (every type if empty) for worker `$5` with a lease of
/// `$6` seconds (`claim_set!`); the others (a line may hold jobs of types
/// this claimer has no handler for) admitted to `pending`, as
/// [`KEY_ADMIT`] would, their queues woken on channel `$8`. Heads whose key has no room are marked as
/// looked at (they wait for a holder to finish, as after an admission);
/// heads left out for the claim's size, or of a queue that no longer
/// `claims_waiting!`, are left for the next claim or an admission. Of the
/// one key the claim's size may cut in the middle of its room, the next
/// job in line is marked as not looked at (`reopened`): the next claim
/// finds it as a head, rather than its waiting for a holder to finish. Run
/// after [`KEY_LOCK_QUEUES`] of the heads' queues, in the same
/// transaction. Returns the claimed rows.
pub(crate) const KEY_CLAIM: &str = concat!(
    "WITH heads AS (
        SELECT h.id, h.queue, h.key, h.i
        FROM unnest($1::uuid[], $2::text[], $3::text[]) WITH ORDINALITY AS h(id, queue, key, i)
    ),
    asked AS (
        SELECT queue, key, min(i) AS i FROM heads GROUP BY queue, key
    ),
    room AS (
        SELECT asked.queue, asked.key, asked.i, c.key_limit - ",
    key_holders!("asked.queue", "asked.key"),
    " AS n
        FROM asked
        JOIN jobqueue_queues AS c ON c.name = asked.queue
        WHERE ",
    claims_waiting!("c"),
    "
    ),
    lined AS (
        SELECT w.id, w.job_type, room.i
        FROM room
        CROSS JOIN LATERAL (
            SELECT w.id, w.job_type FROM jobqueue_jobs AS w
            WHERE w.status = 'waiting' AND w.queue = room.queue AND w.concurrency_key = room.key
              AND w.run_at <= now()
            ORDER BY w.id
            LIMIT greatest(room.n, 0)
        ) AS w
        ORDER BY room.i, w.id
        LIMIT $4 + 1
    ),
    picked AS (
        SELECT id, i, row_number() OVER (ORDER BY i, id) AS place,
               cardinality($7::text[]) = 0 OR job_type = ANY($7::text[]) AS handled
        FROM lined
    ),
    claimed AS (
        UPDATE jobqueue_jobs AS j
        SET key_checked = NULL, ",
    claim_set!("$5", "$6"),
    "
        WHERE j.id = ANY(ARRAY(SELECT id FROM picked WHERE place <= $4 AND handled)) AND ",
    still_waiting!(),
    "
        RETURNING j.*
    ),
    admitted AS (
        UPDATE jobqueue_jobs AS j
        SET status = 'pending', key_checked = NULL
        WHERE j.id = ANY(ARRAY(SELECT id FROM picked WHERE place <= $4 AND NOT handled)) AND ",
    still_waiting!(),
    "
        RETURNING pg_notify($8, j.queue)
    ),
    reopened AS (
        UPDATE jobqueue_jobs AS j SET key_checked = NULL
        WHERE j.id = ANY(ARRAY(SELECT x.id FROM picked AS x
                               JOIN picked AS y ON y.place = x.place - 1 AND y.i = x.i
                               WHERE x.place = $4 + 1))
          AND ",
    still_waiting!(),
    "
    ),
    looked AS (
        UPDATE jobqueue_jobs AS j SET key_checked = true
        WHERE j.id = ANY(ARRAY(SELECT h.id FROM heads AS h
                               JOIN room AS r ON r.queue = h.queue AND r.key = h.key
                               WHERE r.n <= 0))
          AND ",
    still_waiting!(),
    "
    )
    SELECT * FROM claimed"
);

// The hot-path statements of the admission, run prepared (see `prepared.rs`).
crate::prepared::statements! {
    KeyLockQueues => KEY_LOCK_QUEUES,
    KeyAdmit => KEY_ADMIT,
    KeyMarkChecked => KEY_MARK_CHECKED,
    KeyWithWaiting => KEY_WITH_WAITING,
    KeyNew => KEY_NEW,
    KeyClaimHeads => KEY_CLAIM_HEADS,
    KeyClaim => KEY_CLAIM,
}
