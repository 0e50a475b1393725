-- Version 12 spreads MySQL's and MariaDB's claim point over a queue's shards. SQLite keeps its
-- one strict head (see version 11). Recorded here too so that a version number means the same
-- contract in every dialect.
SELECT 1;
