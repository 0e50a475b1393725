-- Deletes the rows count_fold_rows.sql took, named by their keys as a JSON array of
-- [shard, queue, state, due]; count_fold_add.sql puts their sums back, in the same transaction.
-- @param keys: &str
DELETE c FROM backlog_count c
JOIN JSON_TABLE(?, '$[*]' COLUMNS (
    shard BIGINT PATH '$[0]',
    queue VARCHAR(128) CHARSET utf8mb4 COLLATE utf8mb4_bin PATH '$[1]',
    state VARCHAR(16) CHARSET utf8mb4 COLLATE utf8mb4_bin PATH '$[2]',
    due BIGINT PATH '$[3]')) AS j
  ON c.shard = j.shard AND c.queue = j.queue AND c.state = j.state AND c.due = j.due
