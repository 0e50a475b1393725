-- An operator's action; detail is JSON text.
-- @param at: i64
-- @param actor: &str
-- @param action: &str
-- @param queue: Option<&str>
-- @param job_id: Option<i64>
-- @param detail: &str
INSERT INTO backlog_audit (at, actor, action, queue, job_id, detail)
VALUES (?, ?, ?, ?, ?, ?)
