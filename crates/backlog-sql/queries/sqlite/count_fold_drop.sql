-- Deletes the keys count_fold_due.sql added up, and keys that count nothing.
-- @param now: i64
DELETE FROM backlog_count
WHERE (state IN ('scheduled', 'retrying') AND due <= ?1) OR n = 0
