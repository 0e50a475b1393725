-- Opens a transaction claim's transaction, after session_claim_begin, on a connection the claim
-- holds itself (not an sqlx transaction: its commit and rollback set wait_timeout back in the
-- same round trip, see session_claim_commit).
-- @unprepared
BEGIN
