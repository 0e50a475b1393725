-- The minutes stat_fold folded into minute 0. Value: the time.
DELETE FROM backlog_stat WHERE minute > 0 AND minute < ?
