-- Ends streaming replication on a Galera session (session_stream_each_statement): the rest of
-- the transaction replicates at commit, as usual.
-- @unprepared
SET SESSION wsrep_trx_fragment_size = 0
