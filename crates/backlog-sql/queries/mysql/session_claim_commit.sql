-- Commits a transaction claim's transaction (session_claim_begin) and gives the session back
-- the server's wait_timeout, in one round trip. If the COMMIT fails, the SET does not run: the
-- caller closes the connection instead of returning it to the pool.
-- @unprepared
COMMIT; SET SESSION wait_timeout = DEFAULT
