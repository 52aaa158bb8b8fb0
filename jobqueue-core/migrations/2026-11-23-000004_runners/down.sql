DROP TABLE jobqueue_runners;
