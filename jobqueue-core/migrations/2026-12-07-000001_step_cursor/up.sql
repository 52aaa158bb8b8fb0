-- A durable cursor inside one job: where a handler's loop over a large
-- input has got to (`JobContext::advance`), written in the transaction of
-- the work it covers. A retry, a rescue after a crash or a restart reads it
-- back (`JobContext::cursor`) and goes on from there. NULL on a job whose
-- handler never advanced one.
ALTER TABLE jobqueue_jobs ADD COLUMN step_cursor jsonb;
