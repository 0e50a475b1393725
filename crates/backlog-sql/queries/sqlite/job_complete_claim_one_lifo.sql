-- job_complete_claim_lifo for finished jobs that share one lease token (one claim's): `ids` their
-- ids as a JSON array, `token` the token. Found by id alone, without the join of each pair to its
-- row (job_complete_delete_one_unread).
-- @param claim_token: i64
-- @param owner: &str
-- @param expires: i64
-- @param now: i64
-- @param queue: &str
-- @param kinds: Option<String>
-- @param limit: i64
-- @param ids: &str
-- @param token: i64
UPDATE backlog_job
SET state = 'running', attempt = attempt + 1, lease_token = ?1, lease_owner = ?2,
    lease_expires_at = ?3, attempted_at = ?4
WHERE id IN (
    SELECT id FROM backlog_job
    WHERE queue = ?5 AND state = 'available' AND run_at <= ?4
      AND (?6 IS NULL OR kind IN (SELECT value FROM json_each(?6)))
      AND NOT EXISTS (SELECT 1 FROM backlog_queue WHERE name = ?5 AND (paused = 1 OR global_concurrency IS NOT NULL
                                                                       OR rate_limit IS NOT NULL OR group_rate_limit IS NOT NULL))
    ORDER BY priority, run_at DESC, id DESC
    LIMIT +?7
)
AND state = 'available';
DELETE FROM backlog_job
WHERE id IN (SELECT value FROM json_each(?8)) AND lease_token = ?9 AND state = 'running';
SELECT changes(),
       (SELECT json_group_array(json_array(id, kind, payload, priority, attempt, max_attempts,
                                           run_at, created_at, trace_context, group_key))
        FROM backlog_job
        WHERE state = 'running' AND lease_expires_at = ?3 AND lease_token = ?1)
