-- /*PAIRS*/ becomes (?, ?) per (id, lease_token).
DELETE FROM backlog_job
WHERE state = 'running' AND (id, lease_token) IN (VALUES /*PAIRS*/)
RETURNING id
