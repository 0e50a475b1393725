-- Casts: $2 and $4 may be NULL, and PostgreSQL wants a type for a NULL it cannot infer.
UPDATE backlog_job
SET state = $1, run_at = COALESCE($2::bigint, run_at),
    attempt = CASE WHEN $3::boolean THEN 0 ELSE attempt END, finished_at = $4::bigint
WHERE id = $5 AND state IN ($6, $7, $8)
