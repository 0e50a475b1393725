-- The database's clock, in microseconds since the epoch: the same expression as the "now"
-- column defaults. Clients measure their offset from it (see docs/state-machine.md, "Time").
SELECT CAST(EXTRACT(EPOCH FROM clock_timestamp()) * 1000000 AS BIGINT) AS now
