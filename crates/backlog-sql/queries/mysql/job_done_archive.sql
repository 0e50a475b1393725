-- Before a table of the ring is emptied: its jobs of queues whose retention is now `archive`
-- (they were kept before it changed) move to backlog_job_archive, as the prune would move them.
-- Once: a job an earlier pass archived (whose TRUNCATE was then passed over) is left as it is.
-- @unprepared
-- @table SLOT slot
INSERT INTO backlog_job_archive
    (id, queue, kind, payload, state, priority, run_at, attempt, max_attempts, lease_token,
     lease_owner, lease_expires_at, unique_key, errors, result, progress, created_at,
     attempted_at, finished_at, cancel_requested_at, trace_context, group_key)
SELECT d.id, d.queue, d.kind, d.payload, d.state, d.priority, d.run_at, d.attempt,
       d.max_attempts, d.lease_token, d.lease_owner, d.lease_expires_at, d.unique_key, d.errors,
       d.result, d.progress, d.created_at, d.attempted_at, d.finished_at, d.cancel_requested_at,
       d.trace_context, d.group_key
FROM backlog_job_done_/*SLOT*/ d
JOIN backlog_queue q ON q.name = d.queue AND q.retention = 'archive'
ON DUPLICATE KEY UPDATE id = backlog_job_archive.id
