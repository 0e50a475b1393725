-- Sets how long one table of the ring is written (the leader's, from how long completed jobs
-- are kept); no write when it is already so.
-- @param period_us: i64
-- @bind period_us, period_us
UPDATE backlog_job_done_ring SET period_us = ? WHERE period_us <> ?
