-- Whether this server is a node of a Galera cluster (MariaDB Galera, Percona XtraDB Cluster):
-- one row whose value is ON. No row on MySQL without wsrep; OFF on a MariaDB that runs alone.
-- @unprepared
SHOW VARIABLES LIKE 'wsrep_on'
