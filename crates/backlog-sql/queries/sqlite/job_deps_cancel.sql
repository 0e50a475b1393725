-- A new job one of whose parents ended dead or cancelled already, with policy `cancel`: it is
-- cancelled at once, the reason in its errors; `left`: its parents not yet ended, which an
-- operator's retry of it waits for. Also a child cancelled so on MySQL, where backlog's statements
-- release children.
-- @param now: i64
-- @param error: &str
-- @param left: i32
-- @param id: i64
UPDATE backlog_job
SET state = 'cancelled', finished_at = ?1, deps_left = ?3,
    errors = json_insert(errors, '$[#]', json_object('attempt', attempt, 'at', ?1, 'error', ?2))
WHERE id = ?4
