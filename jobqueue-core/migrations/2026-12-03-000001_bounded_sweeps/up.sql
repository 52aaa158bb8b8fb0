-- Waiting jobs no admission looked at yet, by queue and when they are due:
-- a runner of named queues reads the new jobs of its queues alone, never
-- past those of other queues (the index by `run_at` serves a runner of
-- every queue).
CREATE INDEX jobqueue_jobs_key_new_queue_idx
    ON jobqueue_jobs (queue, run_at, id)
    WHERE status = 'waiting' AND key_checked IS NOT TRUE;

-- A workflow's steps by state and end: the prune asks whether a workflow
-- has a live step, a step that ended lately or a failed step, one probe
-- each, instead of reading all of its steps.
CREATE INDEX jobqueue_workflow_steps_state_idx
    ON jobqueue_workflow_steps (workflow_id, state, ended_at);

-- Workflow jobs that failed for good or were cancelled, by when: the sweep
-- of workflow ends reads those of the last moments in full each pass (what
-- changed), and walks the live steps a page at a time for the rest.
CREATE INDEX jobqueue_jobs_workflow_ended_idx
    ON jobqueue_jobs (finished_at)
    WHERE workflow_id IS NOT NULL AND status IN ('failed', 'cancelled');
