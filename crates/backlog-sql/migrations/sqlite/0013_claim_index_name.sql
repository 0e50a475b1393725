-- Version 13 renames MySQL's and MariaDB's claim index (see the MySQL migration). Nothing
-- changes on SQLite. Recorded here too so that a version number means the same contract in
-- every dialect.
SELECT 1;
