DROP TABLE jobqueue_results;
