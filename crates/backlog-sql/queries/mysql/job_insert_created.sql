-- The rows job_insert created: ids from the statement's first id up, carrying its marker.
-- @param first_id: i64
-- @param marker: i64
SELECT id, queue, unique_key FROM backlog_job FORCE INDEX (PRIMARY)
WHERE id >= ? AND lease_token = ? ORDER BY id
