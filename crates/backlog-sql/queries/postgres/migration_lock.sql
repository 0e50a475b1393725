-- Concurrent migrators queue here, so even CREATE TABLE IF NOT EXISTS cannot race (it is not
-- safe against a concurrent create). Transaction-scoped: released at commit or rollback.
-- @param key: i64
SELECT pg_advisory_xact_lock($1)
