-- A new job one of whose parents ended dead or cancelled already, with policy `cancel`: it is
-- cancelled at once, the reason in its errors; `left`: its parents not yet ended, which an
-- operator's retry of it waits for. Also a child cancelled so on MySQL, where backlog's statements
-- release children.
-- @param now: i64
-- @param error: &str
-- @param left: i32
-- @param id: i64
-- @bind now, left, now, error, id
UPDATE backlog_job
SET state = 'cancelled', finished_at = ?, deps_left = ?,
    errors = JSON_ARRAY_APPEND(errors, '$', JSON_OBJECT('attempt', attempt, 'at', ?, 'error', ?))
WHERE id = ?
