-- On a Galera cluster a row lock holds on its own node only: claimers on two nodes could both
-- count and claim. A write to the queue row makes their transactions conflict instead, and
-- certification lets one commit (the other is retried). The value must differ from the one
-- stored (an unchanged row is no write): the claim's time, or a microsecond past the last one.
-- It runs first in the claim's transaction, before queue_lock and the count: a transaction that
-- had only read the row FOR UPDATE when another node's claim was applied was not always aborted.
-- @param now: i64
-- @param queue: &str
UPDATE backlog_queue SET updated_at = GREATEST(updated_at + 1, ?) WHERE name = ?
