-- The database's clock, in microseconds since the epoch: the same expression as the "now"
-- column defaults. Clients measure their offset from it (see docs/state-machine.md, "Time").
SELECT CAST(UNIX_TIMESTAMP(NOW(6)) * 1000000 AS SIGNED) AS now
