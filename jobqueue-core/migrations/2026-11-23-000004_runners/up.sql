-- Live runners: each runner registers itself when it starts, refreshes
-- last_seen at every lease beat and removes its row when it stops. A row
-- not seen for three leases is a runner that died (shown as gone); rows
-- gone for a day are deleted when a runner starts.
CREATE TABLE jobqueue_runners (
    worker_id    text        PRIMARY KEY,
    host         text        NOT NULL,
    pid          integer     NOT NULL,
    version      text        NOT NULL,
    queues       text[]      NOT NULL,
    job_types    text[]      NOT NULL,
    concurrency  integer     NOT NULL,
    lease_secs   double precision NOT NULL,
    started_at   timestamptz NOT NULL DEFAULT now(),
    last_seen    timestamptz NOT NULL DEFAULT now()
);
