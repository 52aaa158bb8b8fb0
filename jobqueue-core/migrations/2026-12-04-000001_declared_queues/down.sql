ALTER TABLE jobqueue_queues DROP COLUMN declared;
