-- Per queue, the run_at of its oldest due available job: how far behind its workers are.
-- Scans the queue's available rows (the claim index); run by /metrics, not by workers.
-- @param now: i64
SELECT queue, MIN(run_at) AS oldest FROM backlog_job
WHERE state = 'available' AND run_at <= $1
GROUP BY queue
