-- An operator's action. Values: at, actor, action, queue, job_id, detail (JSON text).
INSERT INTO backlog_audit (at, actor, action, queue, job_id, detail)
VALUES (?1, ?2, ?3, ?4, ?5, json(?6))
RETURNING id
