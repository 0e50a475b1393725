-- Version 4 changes the predicate of the partial lease index on PostgreSQL and SQLite; MySQL has
-- no partial indexes (its lease index is `(state, lease_expires_at)`). Recorded here too so that a
-- version number means the same contract in every dialect.
SELECT 1;
