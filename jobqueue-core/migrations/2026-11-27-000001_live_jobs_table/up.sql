-- The jobs table set up for live jobs. Completed jobs are deleted as
-- they complete by default (a retention of zero; `jobqueue_completions`
-- keeps their counts), so the table holds the live jobs and the failed and
-- cancelled history only.
--
-- Pages are filled to half. Each claim and each completion still writes a
-- new version of its row (no state change is a HOT update: `status` is in
-- every partial index's predicate); with half of every page free, nearly
-- every new version lands on its row's own page, where PostgreSQL logs
-- only the bytes that changed, and page pruning frees the version it
-- replaced without a vacuum.
--
-- Measured (`jobqueue bench --only drain`, 50,000 no-op jobs, WAL per job
-- end to end, completed rows deleted): fillfactor 70, 846 bytes; 50, 770.
-- The cost of emptier pages is paid by history kept in the table, which a
-- zero retention keeps out of it; a deployment that keeps completed rows
-- for days can set `ALTER TABLE jobqueue_jobs SET (fillfactor = 70)` or 100
-- (pages written after).
ALTER TABLE jobqueue_jobs SET (fillfactor = 50);

-- Vacuums leave the empty pages at the table's end in place unless asked
-- (`VACUUM (TRUNCATE true)`): shortening the table takes an ACCESS EXCLUSIVE
-- lock that every claim and completion waits behind, and under a steady
-- load the end of the table empties and fills again between two vacuums.
-- Autovacuum follows this setting; runners shorten the table at most once
-- every five minutes, so what a long transaction left behind still goes.
ALTER TABLE jobqueue_jobs SET (vacuum_truncate = false);
