-- On a Galera cluster, before a claim under a queue's limits writes the queue row
-- (queue_lock_write): replicate that statement at once, as a fragment of the transaction
-- (streaming replication), instead of at commit. The fragment is certified and applied on every
-- node, so the row is locked cluster-wide from then on: a claim on another node waits for it as
-- one on the same node does, and its count (a causal read) then sees this claim. Written at
-- commit only, two nodes' claims were not always made to conflict: each counted before the other
-- was applied, and both committed (6 running under a limit of 3 in about one run in eight of the
-- Galera flow suite). session_stream_off ends the streaming after that statement.
-- @unprepared
SET SESSION wsrep_trx_fragment_unit = 'statements', wsrep_trx_fragment_size = 1
