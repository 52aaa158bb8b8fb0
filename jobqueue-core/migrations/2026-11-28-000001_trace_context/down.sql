ALTER TABLE jobqueue_jobs DROP COLUMN traceparent;
