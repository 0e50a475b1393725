-- How a transaction begins behind a transaction pooler (pooler=transaction): one round trip
-- that also gives its statements generic plans, no sequential scans and no JIT, as the startup
-- options do on a direct connection (a pooler refuses startup options). Unnamed statements
-- would otherwise be planned for the values at hand: with statistics taken while the table held
-- few rows, the lease rescue became a bitmap scan that read every dead index entry on every run
-- (0.5-1 s each, all 20 server connections busy with it, 64 worker processes at 124 jobs/s),
-- where the generic plan's index scan marks them dead once.
-- @unprepared
BEGIN; SET LOCAL plan_cache_mode = force_generic_plan; SET LOCAL enable_seqscan = off;
SET LOCAL enable_bitmapscan = off; SET LOCAL jit = off
