-- Queue names come as one text array.
SELECT COUNT(*) FROM backlog_job
WHERE state IN ('available', 'running') AND queue = ANY($1::text[])
