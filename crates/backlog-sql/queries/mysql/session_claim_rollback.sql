-- Rolls back a transaction claim's transaction (session_claim_begin) and gives the session back
-- the server's wait_timeout, in one round trip (see session_claim_commit).
-- @unprepared
ROLLBACK; SET SESSION wait_timeout = DEFAULT
