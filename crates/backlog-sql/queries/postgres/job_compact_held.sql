-- Whether something holds the xmin horizon back, so that a VACUUM's kept dead rows are the
-- snapshot's doing and a compaction may free them: another session's transaction or snapshot
-- older than `older_than_ms`, or a standby's feedback or a replication slot holding an xmin.
-- Without it the dead rows a VACUUM seemed to leave are only statistics still on their way (each
-- backend reports its deletions up to a second late), and the next VACUUM takes them. A role
-- that may not see another user's sessions (no pg_read_all_stats: their state reads NULL) cannot
-- tell, and takes such a session for one that holds it.
-- @param older_than_ms: f64
SELECT EXISTS (
           SELECT 1 FROM pg_stat_activity
           WHERE (backend_xmin IS NOT NULL OR backend_xid IS NOT NULL) AND xact_start IS NOT NULL
             AND pid <> pg_backend_pid()
             AND xact_start < clock_timestamp() - make_interval(secs => $1 / 1000.0))
       OR EXISTS (SELECT 1 FROM pg_stat_activity
                  WHERE backend_type = 'client backend' AND state IS NULL
                    AND pid <> pg_backend_pid())
       OR EXISTS (SELECT 1 FROM pg_stat_replication WHERE backend_xmin IS NOT NULL)
       OR EXISTS (SELECT 1 FROM pg_replication_slots WHERE xmin IS NOT NULL) AS held
