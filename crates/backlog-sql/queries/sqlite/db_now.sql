-- The clock "now" column defaults use, in microseconds since the epoch: on SQLite, the system
-- clock of the machine that holds the file. Clients measure their offset from it (see
-- docs/state-machine.md, "Time").
SELECT CAST((julianday('now') - 2440587.5) * 86400000000.0 AS INTEGER) AS now
