-- How many shards a queue's claim point has (1 when the queue has no settings row): where
-- inserts put its jobs and which heads a claim walks.
-- @param queue: &str
SELECT COALESCE(MAX(shards), 1) FROM backlog_queue WHERE name = ?
