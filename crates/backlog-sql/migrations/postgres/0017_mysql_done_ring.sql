-- Version 17 keeps MySQL/MariaDB's completed jobs in a ring of tables that the leader empties
-- whole (PostgreSQL's ring is version 16). Recorded here too so that a version number means the
-- same contract in every dialect.
SELECT 1;
