-- Whether a fold has anything to do (count_fold_due.sql, count_fold_drop.sql): read first, on a
-- reader's connection, so that the leader takes SQLite's one write lock only when it does.
-- @param now: i64
SELECT EXISTS (SELECT 1 FROM backlog_count
               WHERE (state IN ('scheduled', 'retrying') AND due <= ?1) OR n = 0)
