-- Retention for completed jobs kept in the ring of tables (version 17): one bounded batch of a
-- queue's jobs that finished before the window, oldest finish first, with the table each is in.
-- Each table is read by its (queue, finished_at) index (MariaDB pushes the condition into each
-- part of the view). The leader empties whole the tables past the window before it prunes, so
-- this finds the jobs of the table the window's edge falls in. Not a locking read:
-- job_prune_done_lock locks the batch by id.
-- @param queue: &str
-- @param finished_before: i64
-- @param limit: i64
SELECT slot, id FROM backlog_job_done
WHERE queue = ? AND finished_at < ?
ORDER BY finished_at
LIMIT ?
