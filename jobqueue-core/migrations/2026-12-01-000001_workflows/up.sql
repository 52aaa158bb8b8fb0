-- Workflows: jobs that wait for other jobs.
--
-- A workflow is a graph of steps enqueued together (`jobqueue_workflows`):
-- each step is one job, and an edge (`jobqueue_workflow_edges`) makes its
-- child wait for its parent. A step with parents is inserted `blocked`:
-- outside every index a claim or a maintenance pass reads, so it costs
-- them nothing. It becomes due (`pending`, or `scheduled` while its run_at
-- is ahead, or `waiting` behind its concurrency key) once each of its
-- parents has settled its edge.
--
-- `jobqueue_workflow_steps` keeps, per step, what survives the deletion
-- of a completed job's row: its state, its result and its count of
-- parents whose edges are not settled yet. The step's state is the
-- token of its release: the statement that moves it from `live` to an
-- end settles its edges, so an end is released once however many
-- paths see it.
--
-- An edge settles when its parent completes; when its parent fails for
-- good or is cancelled, the workflow's `on_failure` says what happens to
-- the child: `cancel` (the child is cancelled, and so on down the graph),
-- `run` (the edge settles as if the parent had completed) or `wait` (the
-- edge stays until the parent is retried and completes). An edge of kind
-- `finished` settles however its parent ended (a batch's `on_finish`).
CREATE TABLE jobqueue_workflows (
    id         uuid        PRIMARY KEY,
    name       text        NOT NULL,
    on_failure text        NOT NULL DEFAULT 'cancel',
    created_at timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT workflow_name_length CHECK (length(name) BETWEEN 1 AND 200),
    CONSTRAINT on_failure_valid CHECK (on_failure IN ('cancel', 'run', 'wait'))
);

-- Workflows by age: the prune of finished ones.
CREATE INDEX jobqueue_workflows_created_idx
    ON jobqueue_workflows (created_at);

CREATE TABLE jobqueue_workflow_steps (
    job_id       uuid        PRIMARY KEY,
    workflow_id  uuid        NOT NULL REFERENCES jobqueue_workflows (id) ON DELETE CASCADE,
    name         text        NOT NULL,
    job_type     text        NOT NULL,
    state        text        NOT NULL DEFAULT 'live',
    parents_left integer     NOT NULL,
    result       jsonb,
    ended_at     timestamptz,
    CONSTRAINT step_name_length CHECK (length(name) BETWEEN 1 AND 200),
    CONSTRAINT step_state_valid CHECK (state IN ('live', 'completed', 'failed', 'cancelled')),
    CONSTRAINT parents_left_range CHECK (parents_left >= 0),
    CONSTRAINT step_name_unique UNIQUE (workflow_id, name)
);

-- Steps not ended yet: what the sweep of ends outside the completer reads.
CREATE INDEX jobqueue_workflow_steps_live_idx
    ON jobqueue_workflow_steps (job_id)
    WHERE state = 'live';

CREATE TABLE jobqueue_workflow_edges (
    parent_id   uuid    NOT NULL,
    child_id    uuid    NOT NULL,
    workflow_id uuid    NOT NULL REFERENCES jobqueue_workflows (id) ON DELETE CASCADE,
    kind        text    NOT NULL DEFAULT 'completed',
    settled     boolean NOT NULL DEFAULT false,
    PRIMARY KEY (parent_id, child_id),
    CONSTRAINT edge_kind_valid CHECK (kind IN ('completed', 'finished')),
    CONSTRAINT edge_not_a_loop CHECK (parent_id <> child_id)
);

-- A child's parents: the results it reads.
CREATE INDEX jobqueue_workflow_edges_child_idx
    ON jobqueue_workflow_edges (child_id);

-- A workflow's edges: deleted with it.
CREATE INDEX jobqueue_workflow_edges_workflow_idx
    ON jobqueue_workflow_edges (workflow_id);

ALTER TABLE jobqueue_jobs
    ADD COLUMN workflow_id uuid,
    ADD CONSTRAINT blocked_in_workflow
        CHECK (status <> 'blocked' OR workflow_id IS NOT NULL);

ALTER TABLE jobqueue_jobs DROP CONSTRAINT status_valid;
ALTER TABLE jobqueue_jobs ADD CONSTRAINT status_valid CHECK (
    status IN ('blocked', 'waiting', 'scheduled', 'pending', 'unhandled', 'claimed', 'running',
               'completed', 'failed', 'cancelled'));

-- Blocked jobs per queue: what the queue counts and gauges read.
CREATE INDEX jobqueue_jobs_blocked_idx
    ON jobqueue_jobs (queue)
    WHERE status = 'blocked';
