-- What the application's code last declared of a queue's settings
-- (`QueueConfig`, applied by a runner at its start): a setting is applied
-- when its declaration changes, so an operator's change made since the
-- last declaration stands until the code declares something else.
ALTER TABLE jobqueue_queues ADD COLUMN declared jsonb;
