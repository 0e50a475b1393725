-- Rows that differ only in their payload (the usual batch: one queue, kind, priority and time),
-- without unique keys: ?1 to ?6 (queue, kind, priority, run_at, max_attempts, created_at) are
-- bound once, and /*ROWS*/ becomes (?1, ?2, ?7, ?3, ?4, ?5, ?6), (?1, ?2, ?8, …), one payload
-- each: a seventh of the values to bind. Ids as in job_insert_plain.
INSERT INTO backlog_job (queue, kind, payload, priority, run_at, max_attempts, created_at)
VALUES /*ROWS*/
