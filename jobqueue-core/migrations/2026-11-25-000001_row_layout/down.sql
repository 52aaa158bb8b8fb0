-- Every query names its columns, so the order of the columns is kept; the
-- pages written from now on are filled as before.
ALTER TABLE jobqueue_jobs RESET (fillfactor);
