-- Periodic jobs: one row per schedule declared by a worker binary. A slot
-- fires by one statement that advances last_slot from the value the runner
-- read (compare and set) and inserts the slot's jobs, so any number of
-- runners, killed and restarted at any point, fire each slot once.
CREATE TABLE jobqueue_schedules (
    name          text        PRIMARY KEY,
    cron          text        NOT NULL,
    time_zone     text,
    missed        text        NOT NULL DEFAULT 'latest',
    catch_up_most integer     NOT NULL DEFAULT 1,
    job_type      text        NOT NULL,
    queue         text        NOT NULL,
    priority      integer     NOT NULL,
    max_attempts  integer     NOT NULL,
    payload       jsonb       NOT NULL,
    paused        boolean     NOT NULL DEFAULT false,
    -- Slots up to this instant have fired (or were skipped by the policy).
    last_slot     timestamptz NOT NULL,
    -- The last time a runner declared it: a schedule no runner has declared
    -- for a while was removed from the code (shown as orphaned, kept).
    declared_at   timestamptz NOT NULL DEFAULT now(),
    created_at    timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT name_length CHECK (length(name) BETWEEN 1 AND 128),
    CONSTRAINT missed_valid CHECK (missed IN ('latest', 'catch_up')),
    CONSTRAINT catch_up_most_positive CHECK (catch_up_most >= 1)
);
