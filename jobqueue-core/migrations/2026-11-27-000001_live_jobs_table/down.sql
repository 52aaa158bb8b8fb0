-- Back to the fillfactor of 2026-11-25-000001_row_layout, and vacuums that
-- shorten the table whenever its end is empty.
ALTER TABLE jobqueue_jobs RESET (vacuum_truncate);
ALTER TABLE jobqueue_jobs SET (fillfactor = 70);
