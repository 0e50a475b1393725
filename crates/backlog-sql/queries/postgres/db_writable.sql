-- Whether this server takes writes: a primary, not a standby in recovery (checked on each host
-- of a URL that lists several).
SELECT NOT pg_is_in_recovery()
