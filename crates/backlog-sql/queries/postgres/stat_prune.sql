-- The minutes stat_fold folded into minute 0.
-- @param before: i64
DELETE FROM backlog_stat WHERE minute > 0 AND minute < $1
