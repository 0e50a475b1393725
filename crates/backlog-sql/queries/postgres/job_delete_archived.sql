-- An operator's delete of an archived job (retention `archive`, or pruned into the archive).
-- @param id: i64
DELETE FROM backlog_job_archive WHERE id = $1
