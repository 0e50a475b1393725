-- Adds the folded sums to shard 0, which no connection writes: a JSON array of
-- [queue, state, due, n], one per key.
-- @param sums: &str
INSERT INTO backlog_count (shard, queue, state, due, n)
SELECT 0, j.queue, j.state, j.due, j.n FROM JSON_TABLE(?, '$[*]' COLUMNS (
    queue VARCHAR(128) CHARSET utf8mb4 COLLATE utf8mb4_bin PATH '$[0]',
    state VARCHAR(16) CHARSET utf8mb4 COLLATE utf8mb4_bin PATH '$[1]',
    due BIGINT PATH '$[2]',
    n BIGINT PATH '$[3]')) AS j
ON DUPLICATE KEY UPDATE n = backlog_count.n + VALUES(n)
