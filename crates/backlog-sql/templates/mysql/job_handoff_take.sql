-- @name job_handoff_take
-- The jobs job_handoff_next chose, locked and read as a claim reads them (job_claim_update then
-- marks them running under the worker's new lease): one move (waiting to running) where a
-- promotion and then a claim make two. A group's count of active jobs does not change (one
-- leaves, one starts), so no group lock is needed. Only jobs still waiting, of a kind the
-- caller runs, and not in a paused queue nor in one with a rate limit, its own or its groups'
-- (each start is counted): those groups promote as usual.
-- @list IDS ids: i64
-- @param kinds: Option<&str>
-- @param queue: &str
-- @bind ids, kinds, kinds, queue
SELECT
    -- @include claim_columns p= next=yes
FROM backlog_job FORCE INDEX (PRIMARY)
WHERE id IN (/*IDS*/) AND state = 'waiting'
  AND (? IS NULL OR JSON_CONTAINS(?, JSON_QUOTE(kind)))
  AND NOT EXISTS (SELECT 1 FROM backlog_queue WHERE name = ? AND (paused OR rate_limit IS NOT NULL
                                                           OR group_rate_limit IS NOT NULL))
FOR UPDATE
