-- The table of the ring a kept completed job is in, when an action applies to its state (a
-- retry moves it back into the job table first).
-- @param id: i64
-- @param from_a: &str
-- @param from_b: &str
-- @param from_c: &str
SELECT slot FROM backlog_job_done WHERE id = ? AND state IN (?, ?, ?)
