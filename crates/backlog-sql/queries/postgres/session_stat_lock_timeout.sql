-- How long a stats flush waits for another process's lock on a counts row before it gives up
-- (its counts are kept for the next flush). Every process adds to the same row per queue and
-- minute: without a bound, flushes queue up on that row, and behind a transaction pooler they
-- hold every server connection while they wait, so no job is claimed or completed (64 worker
-- processes through PgBouncer stalled for over 30 s and their leases ran out). For this
-- transaction only.
-- @unprepared
SET LOCAL lock_timeout = '500ms'
