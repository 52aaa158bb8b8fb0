DROP TABLE jobqueue_schedules;
