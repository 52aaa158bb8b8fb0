ALTER TABLE jobqueue_runners
    DROP COLUMN maintenance_pass,
    DROP COLUMN maintained_at;
