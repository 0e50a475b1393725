-- Sets how long each partition of backlog_job_done is written before the next (the slot of a
-- finish time is (finished_at / period_us) % 16, migration 0016); writes nothing when unchanged.
-- @param period_us: i64
UPDATE backlog_job_done_ring SET period_us = $1 WHERE period_us <> $1
