-- Tags and metadata, set at enqueue: a job carries a few short tags
-- (`tenant:42`, `import`) that lists and the dashboard select by, and a
-- JSON object of metadata (who enqueued it, where from) that middleware
-- reads. Both are NULL on a job enqueued without them, which is what a
-- job that uses neither stores: a bit of the row's null bitmap each.
ALTER TABLE jobqueue_jobs ADD COLUMN tags text[];
ALTER TABLE jobqueue_jobs ADD COLUMN metadata jsonb;

-- The jobs carrying a tag, found without reading the others. Partial: a
-- job without tags writes no entry, so queues that never tag a job pay
-- nothing for it on enqueue, claim or completion.
CREATE INDEX jobqueue_jobs_tags_idx ON jobqueue_jobs USING gin (tags)
    WHERE tags IS NOT NULL;

-- The tagged jobs, newest first: a tag's list searches them a window at a
-- time (`JOB_WINDOW_FLOOR_TAGGED`), so the untagged history, however long,
-- is never read to find a tag. Partial too: untagged jobs write nothing.
CREATE INDEX jobqueue_jobs_tagged_idx ON jobqueue_jobs (id)
    WHERE tags IS NOT NULL;

-- A periodic job's tags and metadata (`Periodic::with_options`), copied
-- into each job its slots fire.
ALTER TABLE jobqueue_schedules ADD COLUMN tags text[];
ALTER TABLE jobqueue_schedules ADD COLUMN metadata jsonb;
