-- Multi-row insert of rows without unique keys: every row goes in, so the new ids are the
-- statement's last rowid and the ones before it (one statement holds the write lock, and
-- AUTOINCREMENT hands out consecutive ids), and nothing needs returning.
-- @rows ROWS rows: (&str, Option<&str>, &str, i16, i64, Option<i32>, Option<String>, i64)
INSERT INTO backlog_job (queue, kind, payload, priority, run_at, max_attempts, trace_context, created_at)
VALUES /*ROWS*/
