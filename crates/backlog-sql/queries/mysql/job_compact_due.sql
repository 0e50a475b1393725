-- What the leader weighs before it rebuilds the job table (MariaDB): the bytes of its
-- tablespace, its rows (InnoDB's estimate, which leaves out delete-marked records), the undo logs
-- purge has not removed (its history list), the age in seconds of the oldest transaction of
-- another connection, and how many such transactions older than a second (by trx_started, whole
-- seconds) wrote or locked rows: a transactional enqueue left open holds the job table, which the
-- rebuild would wait for, and the information schema does not say which tables a transaction
-- holds, so any write counts. MySQL 8 has no INNODB_SYS_TABLESPACES: the statement fails there,
-- and the leader does not rebuild.
SELECT CAST(COALESCE((SELECT FILE_SIZE FROM information_schema.INNODB_SYS_TABLESPACES
                      WHERE NAME = CONCAT(DATABASE(), '/backlog_job')), 0) AS SIGNED) AS bytes,
       CAST(COALESCE((SELECT TABLE_ROWS FROM information_schema.TABLES
                      WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = 'backlog_job'), 0)
            AS SIGNED) AS live,
       CAST(COALESCE((SELECT VARIABLE_VALUE FROM information_schema.GLOBAL_STATUS
                      WHERE VARIABLE_NAME = 'INNODB_HISTORY_LIST_LENGTH'), 0) AS SIGNED) AS history,
       CAST(COALESCE((SELECT MAX(TIMESTAMPDIFF(SECOND, trx_started, NOW()))
                      FROM information_schema.INNODB_TRX
                      WHERE trx_mysql_thread_id <> CONNECTION_ID()), 0) AS SIGNED) AS oldest_s,
       CAST((SELECT COUNT(*) FROM information_schema.INNODB_TRX
             WHERE trx_mysql_thread_id <> CONNECTION_ID()
               AND (trx_tables_locked > 0 OR trx_rows_modified > 0)
               AND trx_started < NOW() - INTERVAL 1 SECOND) AS SIGNED) AS holders
