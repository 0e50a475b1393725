-- FOR UPDATE after ORDER BY id: rows are locked in id order, like every multi-row writer here.
UPDATE backlog_job
SET state = 'available', attempt = 0, run_at = $1, finished_at = NULL
WHERE id IN (
    SELECT id FROM backlog_job WHERE queue = $2 AND state = 'dead' ORDER BY id LIMIT $3 FOR UPDATE
)
AND state = 'dead'
