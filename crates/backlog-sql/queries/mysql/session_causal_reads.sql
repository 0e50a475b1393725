-- Run on each new connection to a Galera node: every read first waits until the node has
-- applied what the cluster committed before it, so a process that moved to another node still
-- reads its own writes (causal reads; writes are certified cluster-wide at commit anyway).
-- @unprepared
SET SESSION wsrep_sync_wait = 1
