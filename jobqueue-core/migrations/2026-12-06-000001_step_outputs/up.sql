-- Durable steps inside one job: the outputs of the steps its handler
-- finished (`JobContext::step`), in order, `[{"name", "output"}]`, each
-- written in the transaction of the step's own writes. A retry, a rescue
-- after a crash or a restart replays them instead of running them again.
-- NULL on a job whose handler names no step.
ALTER TABLE jobqueue_jobs ADD COLUMN step_outputs jsonb;
