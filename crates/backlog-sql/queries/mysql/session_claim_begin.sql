-- Before a transaction claim's BEGIN (transaction claim mode): the session's wait_timeout
-- becomes the claim's lease in whole seconds, rounded up, so a client that falls silent
-- mid-claim (cut off by the network, say) holds its jobs no longer than a lease: the server
-- closes the silent session, which rolls the transaction back and frees the rows. MariaDB's
-- idle_transaction_timeout would bound the transaction alone, but MySQL 8 has no such setting;
-- wait_timeout is in both. session_claim_commit and session_claim_rollback set it back.
-- @param seconds: i64
SET SESSION wait_timeout = ?
