-- Run on each new connection of the pool: at READ COMMITTED, claimers and producers take no gap
-- locks.
-- @unprepared
SET SESSION TRANSACTION ISOLATION LEVEL READ COMMITTED
