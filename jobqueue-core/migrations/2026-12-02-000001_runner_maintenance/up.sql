-- Where each runner's maintenance is, as the runner reports it at every
-- lease beat: when its last pass (of any service) ended, and the pass under
-- way. The doctor's `maintenance` check reads them: a pass that never ends
-- stalls promotion, rescue, pruning and the workflow sweeps of that runner.
ALTER TABLE jobqueue_runners
    ADD COLUMN maintained_at timestamptz,
    ADD COLUMN maintenance_pass text;
