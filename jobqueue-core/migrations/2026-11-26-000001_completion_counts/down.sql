DROP TABLE jobqueue_completions;
