-- The oldest transaction of another session that holds back the xmin horizon: while it is open,
-- VACUUM keeps every row version it might see, so completed jobs stay as dead rows in the claim
-- index. A session holds it by its snapshot (backend_xmin) or, idle in a transaction that wrote,
-- by its transaction id (backend_xid).
SELECT pid::bigint AS pid,
       EXTRACT(EPOCH FROM (clock_timestamp() - xact_start))::float8 AS age_s,
       COALESCE(state, '') AS state,
       COALESCE(NULLIF(application_name, ''), usename::text, '') AS client
FROM pg_stat_activity
WHERE (backend_xmin IS NOT NULL OR backend_xid IS NOT NULL) AND xact_start IS NOT NULL
  AND pid <> pg_backend_pid()
ORDER BY xact_start
LIMIT 1
