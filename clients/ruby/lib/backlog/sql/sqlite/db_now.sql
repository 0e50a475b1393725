-- The clock "now" column defaults use, in microseconds since the epoch: on SQLite, the system
-- clock of the machine that holds the file. Clients measure their offset from it (see
-- docs/state-machine.md, "Time"). SQLite's clock ticks in whole milliseconds (the defaults'
-- values are whole milliseconds, give or take the float's 50 us): read as the last microsecond
-- of its millisecond, so a client's time is never behind the defaults' (a job a plain INSERT
-- just made is due at once), and at most a millisecond ahead.
SELECT CAST(ROUND((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER) * 1000 + 999 AS now
