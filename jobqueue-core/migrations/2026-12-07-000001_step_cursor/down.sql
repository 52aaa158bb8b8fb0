ALTER TABLE jobqueue_jobs DROP COLUMN step_cursor;
