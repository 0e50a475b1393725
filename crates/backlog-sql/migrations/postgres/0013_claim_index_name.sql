-- Version 13 renames MySQL's and MariaDB's claim index, so that a claim written before version
-- 12 fails there instead of locking its whole queue. PostgreSQL's claim of an earlier version
-- stays correct (it reads more, and locks only what it returns; see docs/sql.md). Recorded here
-- too so that a version number means the same contract in every dialect.
SELECT 1;
