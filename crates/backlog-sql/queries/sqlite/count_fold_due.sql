-- Adds the keys of jobs due later whose time has come (`due` <= now) to their queue's
-- `available`; count_fold_drop.sql then deletes them, in the same transaction.
-- @param now: i64
INSERT INTO backlog_count (queue, state, due, n)
SELECT queue, 'available', 0, SUM(n) FROM backlog_count
WHERE state IN ('scheduled', 'retrying') AND due <= ?1
GROUP BY queue
ON CONFLICT (queue, state, due) DO UPDATE SET n = n + excluded.n
