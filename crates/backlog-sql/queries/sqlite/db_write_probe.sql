-- A write that tells whether this connection may write: run inside a transaction that is rolled
-- back (see `check_writable`), so nothing reaches the file.
-- @unprepared
PRAGMA main.user_version = 0
