ALTER TABLE jobqueue_jobs SET (fillfactor = 70);
DROP TABLE jobqueue_completions;
