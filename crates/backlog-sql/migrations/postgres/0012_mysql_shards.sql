-- Version 12 spreads MySQL's and MariaDB's claim point over a queue's shards, as this
-- dialect's since version 11. Recorded here too so that a version number means the same
-- contract in every dialect.
SELECT 1;
