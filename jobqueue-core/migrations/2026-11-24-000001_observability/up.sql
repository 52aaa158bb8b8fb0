-- The dead letter: failed jobs by when they failed (completed and
-- cancelled rows never enter it). The newest failures, of every queue or of
-- one (the queue is checked in the index), are a backward walk of it; the
-- queue gauges, `stats` and `queue list` count failed jobs per queue from
-- it without reading the finished history.
CREATE INDEX jobqueue_jobs_failed_idx
    ON jobqueue_jobs (finished_at, queue)
    WHERE status = 'failed';
