-- Records when completions turned to the next table of the ring.
-- @param now: i64
UPDATE backlog_job_done_ring SET turned_at = ?
