DROP INDEX jobqueue_jobs_failed_idx;
