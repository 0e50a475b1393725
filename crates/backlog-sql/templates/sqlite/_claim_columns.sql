--# A claim's columns, in the order claimed_from_row! and claimed_from_json (src/rows.rs) read
--# them.
id, kind, payload, priority, attempt, max_attempts, run_at, created_at, trace_context, group_key
