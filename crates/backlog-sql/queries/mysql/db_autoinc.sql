-- The auto-increment lock mode and step, read at connect: in lock mode 0 or 1 the ids of one
-- multi-row INSERT are consecutive, `step` apart (job_insert_plain relies on it).
SELECT CAST(@@innodb_autoinc_lock_mode AS SIGNED), CAST(@@auto_increment_increment AS SIGNED)
