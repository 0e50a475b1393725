-- Rows that differ only in their payload (the usual batch: one queue, kind, priority and time),
-- without unique keys: the shared values are bound once, and the payloads travel as one JSON
-- array of strings (`payloads`), unpacked in order by json_each: eight values to bind for any
-- number of rows. (Numbered placeholders reused per row would be fewer still in the text, but the
-- driver asks SQLite for each placeholder's name, a linear search per placeholder.) Ids as in
-- job_insert_plain: one statement, consecutive.
-- @param queue: &str
-- @param kind: Option<&str>
-- @param priority: i16
-- @param run_at: i64
-- @param max_attempts: Option<i32>
-- @param now: i64
-- @param payloads: String
-- @param trace_context: Option<String>
INSERT INTO backlog_job (queue, kind, payload, priority, run_at, max_attempts, trace_context, created_at)
SELECT ?1, ?2, p.value, ?3, ?4, ?5, ?8, ?6
FROM json_each(?7) AS p
ORDER BY p.key
