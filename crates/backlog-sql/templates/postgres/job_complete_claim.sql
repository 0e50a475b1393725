-- @name job_complete_{form}_claim_{retention}{tokens}_{order}
-- @axis form: then, with
-- @axis retention: delete, keep
-- @axis tokens: many=, one=_one
-- @axis order: fifo, lifo
-- @set mode=plain
-- @if form=then
-- Completes a worker's finished jobs and claims its next ones in one statement and one commit.
-- Returns a row per claimed job (done_ids NULL), then one more row whose done_ids are the
-- completed ids (NULL when none) and whose other columns are NULL. A UNION ALL row costs the
-- database less than joining the ids onto the claimed rows (scripts/pg_claim_costs.py). Both
-- parts see one snapshot and touch disjoint rows (the completed jobs are running under the
-- caller's tokens; the claimed ones available).
-- @else
-- Completes a worker's finished jobs and claims its next ones in one statement, in the form for
-- a queue expected to have jobs, which costs the database less than job_complete_then_claim_*:
-- the claim's own UPDATE … RETURNING is the statement, and done_ids is a column of the claimed
-- row with the smallest id (NULL on the others). The completion only takes effect when the
-- claim finds a job: when it finds none, nothing changes, no row returns, and the caller
-- completes the jobs on their own.
-- @end
-- @if retention=keep
-- The completed jobs are kept (moved to backlog_job_done, below).
-- @else
-- The completed jobs are deleted.
-- @end
-- @if tokens=one
-- They ran under one lease token (`done_token`).
-- @else
-- Each ran under its own lease token (`done_tokens`, in the order of `done_ids`).
-- @end
-- @if order=fifo
-- Order: FIFO, by priority, then due time, then id.
-- @else
-- Order: LIFO, by priority, then latest due time first.
-- @end
-- Shards: taken as job_claim_fifo takes them, from a random shard, each shard's head in turn.
-- Lock waits: 50 ms at most (lock_timeout, for this statement's transaction alone), then the
-- statement fails with 55P03 and the caller runs it again. A claim's SKIP LOCKED does not
-- skip everything: reaching a row whose newer version another claimer is deleting, it
-- waits for that claimer, which may be waiting to delete a row this one just locked; such a
-- deadlock held both for deadlock_timeout (1 s by default) before one gave way. `heads` is
-- read before any row is locked: the claim reads it first, and the completion comes after
-- the claim's pick (it waits for picked, or follows claimed in the UNION ALL).
-- @if order=fifo
-- @include cursor_doc
-- @end
-- @if retention=keep
-- Kept means moved: the DELETE … RETURNING and the INSERT move exactly the completed rows into
-- backlog_job_done, atomically, out of the table that claims read and compactions copy
-- (migrations/postgres/0015_job_done.sql).
-- @end
-- @param token: i64
-- @param owner: &str
-- @param expires: i64
-- @param now: i64
-- @param queue: &str
-- @param kinds: Option<Vec<String>>
-- @param limit: i64
-- @param done_ids: &[i64]
-- @if tokens=one
-- @param done_token: i64
-- @else
-- @param done_tokens: &[i64]
-- @end
-- @if retention=keep
-- @param done_now: i64
-- @end
-- @if order=fifo
-- @param cursor: &[i64]
-- @end
-- @if form=then
-- @if retention=keep
WITH gone AS (
-- @else
WITH done AS (
-- @end
-- @include complete_done
), heads AS MATERIALIZED (
-- @else
WITH heads AS MATERIALIZED (
-- @end
    SELECT n, floor(random() * n)::int AS first,
           set_config('lock_timeout', '50ms', true) AS lock_timeout
-- @include claim_shards
),
-- @if form=then
claimed AS (
    UPDATE backlog_job j
    SET state = 'running', attempt = j.attempt + 1, lease_token = ${token}, lease_owner = ${owner},
        lease_expires_at = ${expires}, attempted_at = ${now}
    WHERE j.id = ANY(ARRAY(SELECT id FROM picked))
    RETURNING
        -- @include claim_columns p=j. next=no
)
SELECT NULL::bigint[] AS done_ids, c.* FROM claimed AS c
UNION ALL
SELECT d.done_ids, c.* FROM (SELECT array_agg(id) AS done_ids FROM done) AS d
LEFT JOIN claimed AS c ON false
-- @else
-- @if retention=keep
gone AS (
-- @else
done AS (
-- @end
-- @include complete_done
)
UPDATE backlog_job j
SET state = 'running', attempt = j.attempt + 1, lease_token = ${token}, lease_owner = ${owner},
    lease_expires_at = ${expires}, attempted_at = ${now}
WHERE j.id = ANY(ARRAY(SELECT id FROM picked))
RETURNING CASE WHEN j.id = (SELECT min(id) FROM picked)
    THEN (SELECT array_agg(id) FROM done) END AS done_ids,
          -- @include claim_columns p=j. next=no
-- @end
