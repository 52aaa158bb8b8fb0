-- The dead letter by queue: failed jobs, counted per queue by the queue
-- gauges, `stats` and `queue list` without reading the finished history
-- (completed and cancelled rows never enter it), newest first for the
-- places that list them.
CREATE INDEX jobqueue_jobs_failed_idx
    ON jobqueue_jobs (queue, finished_at)
    WHERE status = 'failed';
