-- Rate limits and back-off of a queue, fleet-wide.
--
-- `rate_starts` jobs may start per `rate_period` (a start is a claim: the
-- moment a runner takes the job), counted over a sliding window by every
-- runner together: no window of that length holds more starts. The window
-- is kept in the queue's row itself, which claims of the queue lock and
-- update in turn: `rate_at` holds the times of the claims within the last
-- period (the database's clock at each claim statement), `rate_jobs` how
-- many jobs each took. The claims of one slot, a thousandth of the period
-- on a fixed grid, share an entry kept at the slot's end (which only counts
-- them longer), so the arrays hold at most about a thousand entries.
--
-- `backoff_until`: no runner claims from the queue before this time; set by
-- a job whose handler reported "rate limited, retry after D" (HTTP 429).
ALTER TABLE jobqueue_queues
    ADD COLUMN rate_starts   integer,
    ADD COLUMN rate_period   interval,
    ADD COLUMN rate_at       timestamptz[] NOT NULL DEFAULT '{}',
    ADD COLUMN rate_jobs     integer[]     NOT NULL DEFAULT '{}',
    ADD COLUMN backoff_until timestamptz,
    ADD CONSTRAINT rate_limit_whole
        CHECK ((rate_starts IS NULL) = (rate_period IS NULL)),
    ADD CONSTRAINT rate_starts_positive
        CHECK (rate_starts IS NULL OR rate_starts BETWEEN 1 AND 1000000),
    ADD CONSTRAINT rate_period_range
        CHECK (rate_period IS NULL
               OR (rate_period >= interval '1 millisecond' AND rate_period <= interval '1 day')),
    ADD CONSTRAINT rate_window_pairs
        CHECK (cardinality(rate_at) = cardinality(rate_jobs));
