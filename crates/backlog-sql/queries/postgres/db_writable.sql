-- Whether this server takes writes: a primary, not a standby in recovery (checked on each host
-- of a URL that lists several). Sent unprepared: one round trip, which a transaction pooler keeps
-- on one server connection.
-- @unprepared
SELECT NOT pg_is_in_recovery()
