DROP TABLE jobqueue_jobs;
