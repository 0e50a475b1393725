-- Turns completions to another table of the ring: the view they insert through names it from
-- now on. Waits at most a second for the completions that have written through the view and not
-- yet committed (new ones queue behind it meanwhile); on a connection of its own.
-- @unprepared
-- @table SLOT slot
SET SESSION lock_wait_timeout = 1;
CREATE OR REPLACE VIEW backlog_job_done_current AS
SELECT id, queue, kind, payload, state, priority, run_at, attempt, max_attempts, lease_token,
       lease_owner, lease_expires_at, unique_key, errors, result, progress, created_at,
       attempted_at, finished_at, cancel_requested_at, trace_context, group_key, shard
FROM backlog_job_done_/*SLOT*/
