-- The rows a fold takes (and locks): every connection's (shard <> 0), keys that count nothing,
-- and keys of jobs due later whose time has come. SKIP LOCKED: a row a writer's open
-- transaction holds stays for the next fold, and no writer waits on the fold.
-- @param now: i64
-- @param limit: i64
SELECT shard, queue, state, due, n FROM backlog_count
WHERE shard <> 0 OR n = 0 OR (state IN ('scheduled', 'retrying') AND due <= ?)
LIMIT ?
FOR UPDATE SKIP LOCKED
