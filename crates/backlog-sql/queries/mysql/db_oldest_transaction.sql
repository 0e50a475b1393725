-- The oldest open InnoDB transaction of another connection: while it is open, purge keeps the
-- row versions it might read (the history list grows) and scans over deleted jobs slow down.
SELECT CAST(t.trx_mysql_thread_id AS SIGNED) AS pid,
       CAST(TIMESTAMPDIFF(MICROSECOND, t.trx_started, NOW(6)) AS DOUBLE) / 1e6 AS age_s,
       COALESCE(p.COMMAND, '') AS state,
       COALESCE(p.USER, '') AS client
FROM information_schema.INNODB_TRX t
LEFT JOIN information_schema.PROCESSLIST p ON p.ID = t.trx_mysql_thread_id
WHERE t.trx_mysql_thread_id <> CONNECTION_ID()
ORDER BY t.trx_started
LIMIT 1
