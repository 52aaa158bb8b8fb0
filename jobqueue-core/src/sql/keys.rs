//! The admission of keyed jobs: the statements that move `waiting` jobs
//! (keyed jobs of a queue with a key limit, see the `concurrency_keys`
//! migration) to `pending` when their key has room.
//!
//! A key's "holders" are its jobs in the live statuses other than
//! `waiting` (`key_holders!`): admitted and not finished. An admission
//! of a queue's keys runs in a transaction of its own that first takes the
//! queue's advisory lock and tries its keys' ([`KEY_LOCK`]) and then, in a second
//! statement (whose snapshot sees every admission committed before the
//! lock was granted), counts each key's holders and admits its oldest
//! waiting jobs up to the limit ([`KEY_ADMIT`]). Admissions of one queue
//! thus never overlap, and a key never has more holders than its limit
//! (unless the limit was lowered, or set while more were live).
//!
//! An enqueue admits its keyed jobs itself when their keys have room
//! (`status_at_insert!`, see `jobs/insert.rs`): before its insert it tries each
//! key's lock ([`KEY_LOCK_FOR_INSERT`], never waiting), then counts the
//! holders of the keys it got ([`KEY_ROOM_FOR_INSERT`]) in a later
//! statement, whose snapshot sees every admission committed before, and
//! admits within that room; its insert reads no other job. An admission
//! pass tries the same locks of the keys it looks at ([`KEY_LOCK`]) and
//! leaves the keys it did not get to its next pass ([`KEY_RECHECK`]): an
//! enqueue of theirs is still open.
//! So every decision that makes a job of a key a holder is taken under
//! that key's lock, held until it commits, and sees all earlier ones.
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
//! concurrency_key` of the holders), `jobqueue_jobs_key_new_idx`
//! (`run_at` of the waiting jobs no admission looked at yet) and
//! `jobqueue_jobs_key_new_queue_idx` (the same jobs by `queue, run_at,
//! id`).

/// The advisory-lock class of the admissions of a queue (the second key is
/// `hashtext` of the queue's name): the ASCII of `jqky`, a number no other
/// jobqueue lock uses. Two-key advisory locks never meet an application's
/// one-key (`bigint`) locks.
macro_rules! admission_lock_class {
    () => {
        "1785817977"
    };
}

/// The lock of the admission decisions of key `$key` of queue `$queue`
/// (SQL expressions), tried: an advisory lock of class `jqkl` (in ASCII),
/// the second key `hashtext` of the queue's name and the one of 256
/// buckets the key falls in. Keys share their bucket's lock, so that a
/// transaction holds at most 256 per queue however many keys it enqueues
/// (each is an entry of the server's shared lock table, which a few
/// thousand fill). Taken only with
/// `pg_try_advisory_xact_lock`: an enqueue or an admission that does not
/// get it leaves the key's jobs waiting.
macro_rules! key_lock {
    ($queue:literal, $key:literal) => {
        concat!(
            "pg_try_advisory_xact_lock(1785817964, hashtext(",
            $queue,
            " || '/' || (hashtext(",
            $key,
            ") & 255)::text))"
        )
    };
}

/// Takes, until the end of the transaction, the admission lock of each
/// queue of arrays `$1` (queues) and `$2` (keys), in name order (so two
/// admissions never wait on each other in a circle), then tries the lock
/// of each key (`key_lock!`). Returns the keys it got: `queue`, `key`.
pub(crate) const KEY_LOCK: &str = concat!(
    "WITH queues AS MATERIALIZED (
        SELECT count(pg_advisory_xact_lock(",
    admission_lock_class!(),
    ", hashtext(q.queue)))::int8 AS n
        FROM (SELECT DISTINCT queue FROM unnest($1::text[]) AS a(queue) ORDER BY queue) AS q
    ),
    asked AS MATERIALIZED (
        SELECT DISTINCT a.queue, a.key FROM unnest($1::text[], $2::text[]) AS a(queue, key)
        ORDER BY a.queue, a.key
    )
    SELECT asked.queue, asked.key
    FROM queues CROSS JOIN asked
    WHERE queues.n >= 0 AND ",
    key_lock!("asked.queue", "asked.key"),
    "
    ORDER BY asked.queue, asked.key"
);

/// Of arrays `$1` (queues) and `$2` (keys), the keys of queues with a key
/// limit, each once, with whether this transaction got its lock
/// (`key_lock!`, tried in (queue, key) order): `queue`, `key`, `locked`.
/// None is locked unless the transaction is READ COMMITTED (a later
/// statement of a transaction of another level would not see the
/// admissions committed before the lock). Run before an insert, then
/// [`KEY_ROOM_FOR_INSERT`] of its rows.
pub(crate) const KEY_LOCK_FOR_INSERT: &str = concat!(
    "WITH limited AS MATERIALIZED (
        SELECT DISTINCT a.queue, a.key
        FROM unnest($1::text[], $2::text[]) AS a(queue, key)
        JOIN jobqueue_queues AS q ON q.name = a.queue AND q.key_limit IS NOT NULL
        WHERE a.key IS NOT NULL
        ORDER BY a.queue, a.key
    )
    SELECT limited.queue, limited.key,
           CASE WHEN current_setting('transaction_isolation') = 'read committed'
                THEN ",
    key_lock!("limited.queue", "limited.key"),
    " ELSE false END AS locked
    FROM limited
    ORDER BY limited.queue, limited.key"
);

/// What an enqueue's insert admits by, for each key of arrays `$1`
/// (queues), `$2` (keys) and `$3` (whether the enqueue got the key's lock),
/// the rows of [`KEY_LOCK_FOR_INSERT`], in a later statement of the same
/// transaction (so its snapshot sees every admission committed before the
/// lock): `queue`, `key`; `waits`, whether a due job of the key waits (the
/// new ones line up behind it); and `room`, how many of the key's jobs the
/// insert may admit: null when the enqueue did not get the lock or any job
/// of the key waits; in a queue kept in order, 1 when the key has no
/// holder, else 0; in another, its key limit less its holders.
///
/// Run planned for the table as it is at each run, never kept prepared:
/// a plan kept from a nearly empty table may count a key's holders by
/// reading the whole table for each key. A key's line is probed with a
/// `LATERAL` and a limit, which the planner cannot turn into a hash of
/// every waiting job (an `EXISTS` it can: 400 ms per enqueue of 10,000
/// keys with 190,000 jobs waiting); its due jobs only when it has a line.
pub(crate) const KEY_ROOM_FOR_INSERT: &str = concat!(
    "SELECT a.queue, a.key, due_line.id IS NOT NULL AS waits,
           (CASE WHEN NOT a.locked OR line.id IS NOT NULL THEN NULL
                 WHEN q.key_ordered THEN (CASE WHEN ",
    key_holders!("a.queue", "a.key"),
    " = 0 THEN 1 ELSE 0 END)
                 ELSE q.key_limit - ",
    key_holders!("a.queue", "a.key"),
    " END)::int4 AS room
    FROM unnest($1::text[], $2::text[], $3::bool[]) AS a(queue, key, locked)
    JOIN jobqueue_queues AS q ON q.name = a.queue AND q.key_limit IS NOT NULL
    LEFT JOIN LATERAL (
        SELECT w.id FROM jobqueue_jobs AS w
        WHERE w.status = 'waiting' AND w.queue = a.queue AND w.concurrency_key = a.key
        LIMIT 1
    ) AS line ON true
    LEFT JOIN LATERAL (
        SELECT w.id FROM jobqueue_jobs AS w
        WHERE line.id IS NOT NULL
          AND w.status = 'waiting' AND w.queue = a.queue AND w.concurrency_key = a.key
          AND w.run_at <= now()
        LIMIT 1
    ) AS due_line ON true"
);

/// Marks the first waiting job of each key of arrays `$1` (queues) and
/// `$2` (keys) as not looked at (`key_checked` null): keys an admission
/// did not get the lock of, for the next pass of new jobs to look at.
pub(crate) const KEY_RECHECK: &str = "
    UPDATE jobqueue_jobs AS j SET key_checked = NULL
    FROM (SELECT DISTINCT queue, key FROM unnest($1::text[], $2::text[]) AS a(queue, key)) AS a
    CROSS JOIN LATERAL (
        SELECT w.id FROM jobqueue_jobs AS w
        WHERE w.status = 'waiting' AND w.queue = a.queue AND w.concurrency_key = a.key
        ORDER BY w.id
        LIMIT 1
    ) AS head
    WHERE j.id = head.id AND j.key_checked";

/// Whether row `j` is (still) `waiting`, written so that the planner
/// cannot read it as the predicate of the waiting jobs' partial indexes:
/// the statements that write jobs by id go through the primary key, never
/// through a walk of a partial index that statistics taken before the
/// jobs were inserted call small (see `jobs/mod.rs`).
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
/// channel `$3`. Run after [`KEY_LOCK`] of the keys, in the same
/// transaction, and only for keys whose lock it got. Returns how many jobs
/// it admitted.
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

/// Up to `$2` waiting jobs no admission looked at yet that are due, of the
/// queues in `$1` (every queue if empty), after the position `$3` (queue),
/// `$4` (due at), `$5` (id) (from the first when they are null): `id`,
/// `queue`, `key`, `run_at`. The position lets a pass page past jobs whose
/// key it could not lock (an enqueue of the key is open): they stay not
/// looked at, and a read from the first would find them again.
///
/// Of every queue, soonest due first (`jobqueue_jobs_key_new_idx`, by
/// `run_at`: the read ends at the first job not due; the queue of the
/// position goes unused); of named queues, queue by queue, each soonest due
/// first (`jobqueue_jobs_key_new_queue_idx`, by queue and `run_at`: one
/// range per named queue, never a read past another queue's new jobs).
/// Only one of the two parts reads anything, as `$1` is empty or not.
pub(crate) const KEY_NEW: &str = "
    SELECT id, queue, key, run_at FROM (
        (SELECT id, queue, concurrency_key AS key, run_at
         FROM jobqueue_jobs
         WHERE cardinality($1::text[]) = 0
           AND status = 'waiting' AND key_checked IS NOT TRUE AND run_at <= now()
           AND (run_at, id) > (coalesce($4::timestamptz, '-infinity'),
                               coalesce($5::uuid, '00000000-0000-0000-0000-000000000000'))
         ORDER BY run_at, id
         LIMIT $2)
        UNION ALL
        (SELECT n.id, n.queue, n.key, n.run_at
         FROM (SELECT DISTINCT queue FROM unnest($1::text[]) AS u(queue)) AS q
         CROSS JOIN LATERAL (
             SELECT id, queue, concurrency_key AS key, run_at
             FROM jobqueue_jobs
             WHERE queue = q.queue
               AND status = 'waiting' AND key_checked IS NOT TRUE AND run_at <= now()
               AND (queue, run_at, id) > (coalesce($3::text, ''),
                                          coalesce($4::timestamptz, '-infinity'),
                                          coalesce($5::uuid, '00000000-0000-0000-0000-000000000000'))
             ORDER BY run_at, id
             LIMIT $2
         ) AS n)
    ) AS page
    ORDER BY CASE WHEN cardinality($1::text[]) = 0 THEN '' ELSE queue END, run_at, id
    LIMIT $2";

/// The first key with waiting jobs after key `$key` of queue `$queue` (SQL
/// expressions) in (queue, key) order, of the queues in `$3` (every queue if
/// empty): `queue`, `key`, at most one row. A descent of
/// `jobqueue_jobs_key_waiting_idx` for the next key of the same queue, and,
/// when it has none, for the first key of the next queue (of the named
/// queues: one descent per named queue until one has waiting jobs): never a
/// read of a key's line, however many jobs it holds.
macro_rules! next_waiting_key {
    ($queue:literal, $key:literal) => {
        concat!(
            "SELECT * FROM (
            (SELECT w.queue, w.concurrency_key AS key FROM jobqueue_jobs AS w
             WHERE w.status = 'waiting' AND w.queue = ",
            $queue,
            " AND w.concurrency_key > ",
            $key,
            "
               AND (cardinality($3::text[]) = 0 OR ",
            $queue,
            " = ANY($3::text[]))
             ORDER BY w.concurrency_key LIMIT 1)
            UNION ALL
            (SELECT w.queue, w.concurrency_key FROM jobqueue_jobs AS w
             WHERE cardinality($3::text[]) = 0 AND w.status = 'waiting' AND w.queue > ",
            $queue,
            "
             ORDER BY w.queue, w.concurrency_key LIMIT 1)
            UNION ALL
            (SELECT h.queue, h.key
             FROM (SELECT DISTINCT l.queue FROM unnest($3::text[]) AS l(queue)
                   WHERE l.queue > ",
            $queue,
            " ORDER BY l.queue) AS l
             CROSS JOIN LATERAL (
                 SELECT w.queue, w.concurrency_key AS key FROM jobqueue_jobs AS w
                 WHERE w.status = 'waiting' AND w.queue = l.queue
                 ORDER BY w.concurrency_key LIMIT 1
             ) AS h
             LIMIT 1)
        ) AS c LIMIT 1"
        )
    };
}

/// The keys with waiting jobs, of the queues in `$3` (every queue if
/// empty), after key `$2` of queue `$1` (from the first if `$1` is null),
/// at most `$4`, in (queue, key) order: `queue`, `key`, and whether the
/// key has room (fewer holders than its queue's key limit, or no limit).
/// One index descent per key (`next_waiting_key!`, a skip scan, from a
/// first row that is the position itself, left out of the result): a page
/// costs its keys, not the jobs waiting in their lines.
pub(crate) const KEY_SWEEP: &str = concat!(
    "WITH RECURSIVE keys AS (
        SELECT coalesce($1::text, '') AS queue, coalesce($2::text, '') AS key, 0 AS n
        UNION ALL
        SELECT f.queue, f.key, k.n + 1
        FROM keys AS k
        CROSS JOIN LATERAL (",
    next_waiting_key!("k.queue", "k.key"),
    ") AS f
        WHERE k.n < $4
    )
    SELECT k.queue, k.key,
           (c.key_limit IS NULL OR c.key_limit > ",
    key_holders!("k.queue", "k.key"),
    ") AS has_room
    FROM keys AS k
    LEFT JOIN jobqueue_queues AS c ON c.name = k.queue
    WHERE k.n > 0
    ORDER BY k.queue, k.key"
);

/// Whether any job of the queues in `$1` (every queue if empty) waits for
/// its key's room: `waiting`. One probe of the waiting jobs' index.
pub(crate) const KEY_ANY_WAITING: &str = "
    SELECT EXISTS (
        SELECT 1 FROM jobqueue_jobs
        WHERE status = 'waiting'
          AND (cardinality($1::text[]) = 0 OR queue = ANY($1::text[]))
    ) AS waiting";

/// The keys of queue `$1` with waiting jobs (`queue`, `key`): what a
/// change of its key limit admits from.
pub(crate) const KEY_WAITING_OF_QUEUE: &str = "
    SELECT DISTINCT queue, concurrency_key AS key
    FROM jobqueue_jobs
    WHERE status = 'waiting' AND queue = $1";

// The hot-path statements of the admission, run prepared (see `prepared.rs`).
crate::prepared::statements! {
    KeyLock => KEY_LOCK,
    KeyLockForInsert => KEY_LOCK_FOR_INSERT,
    KeyRoomForInsert => KEY_ROOM_FOR_INSERT,
    KeyAdmit => KEY_ADMIT,
    KeyMarkChecked => KEY_MARK_CHECKED,
    KeyWithWaiting => KEY_WITH_WAITING,
    KeyNew => KEY_NEW,
    KeyAnyWaiting => KEY_ANY_WAITING,
}
