ALTER TABLE jobqueue_schedules DROP COLUMN metadata;
ALTER TABLE jobqueue_schedules DROP COLUMN tags;
DROP INDEX jobqueue_jobs_tagged_idx;
DROP INDEX jobqueue_jobs_tags_idx;
ALTER TABLE jobqueue_jobs DROP COLUMN metadata;
ALTER TABLE jobqueue_jobs DROP COLUMN tags;
