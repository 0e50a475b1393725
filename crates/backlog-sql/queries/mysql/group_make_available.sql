-- The jobs group_next chose, made available.
-- @list IDS ids: i64
UPDATE backlog_job FORCE INDEX (PRIMARY) SET state = 'available'
WHERE id IN (/*IDS*/) AND state = 'waiting'
