"""The library's statements, copied verbatim from crates/backlog-sql/queries/<key> (backlog's
test suite fails when a copy and its file differ). Nothing but the list markers and
placeholders is changed before a statement is sent: see `_dialect`."""

from __future__ import annotations

QUERIES: dict[str, str] = {}

QUERIES["sqlite/job_claim_fifo.sql"] = """\
-- @generated from templates/sqlite/job_claim.sql by tests/templates.rs: edit the template
-- Claims up to `limit` due jobs of a queue under one new lease, FIFO: by priority, then due time,
-- then id.
-- `kinds`: a JSON array, NULL for any kind. One statement: SQLite has a single writer, so
-- the picked rows cannot be taken by anyone else.
-- The claim of the SQL contract, for clients in other languages (clients/python): their driver
-- reads a result's rows where it runs. This library marks the rows and reads them back as one
-- row (job_claim_json_fifo), the same jobs.
-- @external
-- @param token: i64
-- @param owner: &str
-- @param expires: i64
-- @param now: i64
-- @param queue: &str
-- @param kinds: Option<String>
-- @param limit: i64
UPDATE backlog_job
SET state = 'running', attempt = attempt + 1, lease_token = ?1, lease_owner = ?2,
    lease_expires_at = ?3, attempted_at = ?4
WHERE id IN (
    SELECT id FROM backlog_job
    WHERE queue = ?5 AND state = 'available' AND run_at <= ?4
      AND (?6 IS NULL OR kind IN (SELECT value FROM json_each(?6)))
      AND NOT EXISTS (SELECT 1 FROM backlog_queue WHERE name = ?5 AND (paused = 1 OR global_concurrency IS NOT NULL
                                                                       OR rate_limit IS NOT NULL OR group_rate_limit IS NOT NULL))
    ORDER BY priority, run_at, id
    LIMIT +?7
)
-- Not the queue, token or lease expiry: the claimer chose them.
RETURNING
    id, kind, payload, priority, attempt, max_attempts, run_at, created_at, trace_context, group_key
"""
QUERIES["sqlite/job_claim_lifo.sql"] = """\
-- @generated from templates/sqlite/job_claim.sql by tests/templates.rs: edit the template
-- Claims up to `limit` due jobs of a queue under one new lease, LIFO: by priority, then latest due
-- time first, then highest id.
-- `kinds`: a JSON array, NULL for any kind. One statement: SQLite has a single writer, so
-- the picked rows cannot be taken by anyone else.
-- The claim of the SQL contract, for clients in other languages (clients/python): their driver
-- reads a result's rows where it runs. This library marks the rows and reads them back as one
-- row (job_claim_json_lifo), the same jobs.
-- @external
-- @param token: i64
-- @param owner: &str
-- @param expires: i64
-- @param now: i64
-- @param queue: &str
-- @param kinds: Option<String>
-- @param limit: i64
UPDATE backlog_job
SET state = 'running', attempt = attempt + 1, lease_token = ?1, lease_owner = ?2,
    lease_expires_at = ?3, attempted_at = ?4
WHERE id IN (
    SELECT id FROM backlog_job
    WHERE queue = ?5 AND state = 'available' AND run_at <= ?4
      AND (?6 IS NULL OR kind IN (SELECT value FROM json_each(?6)))
      AND NOT EXISTS (SELECT 1 FROM backlog_queue WHERE name = ?5 AND (paused = 1 OR global_concurrency IS NOT NULL
                                                                       OR rate_limit IS NOT NULL OR group_rate_limit IS NOT NULL))
    ORDER BY priority, run_at DESC, id DESC
    LIMIT +?7
)
-- Not the queue, token or lease expiry: the claimer chose them.
RETURNING
    id, kind, payload, priority, attempt, max_attempts, run_at, created_at, trace_context, group_key
"""

QUERIES["sqlite/job_complete_delete.sql"] = """\
-- @generated from templates/sqlite/job_complete.sql by tests/templates.rs: edit the template
-- Completes running jobs whose lease tokens still match: deletes them, returning their ids.
-- `pairs`: the (id, lease_token) pairs as a JSON array of two-element arrays. One statement text
-- for any batch size; each pair is looked up by primary key (never a scan of the running jobs).
-- @param pairs: &str
DELETE FROM backlog_job
WHERE id IN (
    SELECT b.id FROM json_each(?1) AS p
    JOIN backlog_job AS b ON b.id = p.value ->> 0
    WHERE b.lease_token = p.value ->> 1 AND b.state = 'running'
)
RETURNING id
"""

QUERIES["sqlite/job_complete_keep.sql"] = """\
-- @generated from templates/sqlite/job_complete.sql by tests/templates.rs: edit the template
-- Completes running jobs whose lease tokens still match: marks them completed, kept, returning
-- their ids. `pairs`: the (id, lease_token) pairs as JSON (see job_complete_delete).
-- @param pairs: &str
-- @param now: i64
UPDATE backlog_job
SET state = 'completed', finished_at = ?2, lease_token = NULL, lease_expires_at = NULL
WHERE id IN (
    SELECT b.id FROM json_each(?1) AS p
    JOIN backlog_job AS b ON b.id = p.value ->> 0
    WHERE b.lease_token = p.value ->> 1 AND b.state = 'running'
)
RETURNING id
"""

QUERIES["sqlite/job_complete_archive.sql"] = """\
-- @generated from templates/sqlite/job_complete.sql by tests/templates.rs: edit the template
-- Copies running jobs whose lease tokens still match into the archive, completed. `pairs`: the
-- (id, lease_token) pairs as JSON (see job_complete_delete). The DELETE of job_complete_delete
-- follows in the same transaction.
-- @param pairs: &str
-- @param now: i64
INSERT INTO backlog_job_archive
    (id, queue, kind, payload, state, priority, run_at, attempt, max_attempts, lease_token,
     lease_owner, lease_expires_at, unique_key, errors, result, progress, created_at,
     attempted_at, finished_at, cancel_requested_at, trace_context, group_key)
SELECT id, queue, kind, payload, 'completed', priority, run_at, attempt, max_attempts, NULL,
       lease_owner, NULL, unique_key, errors, result, progress, created_at, attempted_at, ?2,
       cancel_requested_at, trace_context, group_key
FROM backlog_job
WHERE id IN (
    SELECT b.id FROM json_each(?1) AS p
    JOIN backlog_job AS b ON b.id = p.value ->> 0
    WHERE b.lease_token = p.value ->> 1 AND b.state = 'running'
)
"""

QUERIES["sqlite/job_fail.sql"] = """\
-- A failed attempt of a job whose lease token still matches: retried (available at `run_at`),
-- dead or cancelled (finished at `finished_at`), the error appended to its errors.
-- @param state: &str
-- @param run_at: i64
-- @param finished_at: Option<i64>
-- @param now: i64
-- @param error: &str
-- @param id: i64
-- @param token: i64
-- A failed job of an ordered group whose queue lets the group go on (group_on_failure 'next')
-- waits for its group's turn again instead of holding its group's place while it waits to retry.
UPDATE backlog_job
SET state = CASE WHEN ?1 = 'available' AND group_key IS NOT NULL
                  AND (SELECT q.group_on_failure FROM backlog_queue q WHERE q.name = backlog_job.queue) = 'next'
             THEN 'waiting' ELSE ?1 END,
    run_at = ?2, finished_at = ?3, lease_token = NULL, lease_expires_at = NULL,
    errors = json_insert(errors, '$[#]', json_object('attempt', attempt, 'at', ?4, 'error', ?5))
WHERE id = ?6 AND lease_token = ?7 AND state = 'running'
"""

QUERIES["sqlite/job_heartbeat.sql"] = """\
-- Extends the lease of a job whose lease token still matches. Also tells the worker whether
-- cancellation of the job was requested.
-- @param expires: i64
-- @param id: i64
-- @param token: i64
UPDATE backlog_job SET lease_expires_at = ?1
WHERE id = ?2 AND lease_token = ?3 AND state = 'running'
RETURNING cancel_requested_at IS NOT NULL AS cancel_requested
"""

QUERIES["sqlite/job_release.sql"] = """\
-- Back to available without consuming the attempt the claim counted.
-- @param run_at: i64
-- @param id: i64
-- @param token: i64
UPDATE backlog_job
SET state = 'available', attempt = MAX(attempt - 1, 0), run_at = ?1,
    lease_token = NULL, lease_expires_at = NULL
WHERE id = ?2 AND lease_token = ?3 AND state = 'running'
"""

QUERIES["sqlite/job_rescue.sql"] = """\
-- Expired leases: back to available, or dead when the attempt that died was the last one.
-- Returns the queue of each job rescued and whether it ended dead (for the per-queue counts).
-- After: the rescue's floor, as on PostgreSQL (the smallest integer: a full pass).
-- @param now: i64
-- @param limit: i64
-- @param after: i64
UPDATE backlog_job
SET state = CASE WHEN attempt >= COALESCE(max_attempts,
                     (SELECT q.max_attempts FROM backlog_queue q WHERE q.name = backlog_job.queue), 25)
                 THEN 'dead' ELSE 'available' END,
    finished_at = CASE WHEN attempt >= COALESCE(max_attempts,
                     (SELECT q.max_attempts FROM backlog_queue q WHERE q.name = backlog_job.queue), 25)
                 THEN ?1 ELSE NULL END,
    run_at = ?1,
    errors = json_insert(errors, '$[#]', json_object('attempt', attempt, 'at', ?1,
             'error', 'lease expired (worker ' || COALESCE(lease_owner, '?') || ' stopped heartbeating)')),
    lease_token = NULL, lease_expires_at = NULL
WHERE id IN (
    SELECT id FROM backlog_job
    WHERE state = 'running' AND lease_expires_at < ?1 AND lease_expires_at >= ?3
    ORDER BY lease_expires_at
    LIMIT +?2
)
RETURNING queue, state = 'dead' AS dead
"""

QUERIES["sqlite/queue_get.sql"] = """\
-- A queue's stored settings.
-- @param name: &str
SELECT name, paused, max_attempts, backoff_base_ms, backoff_max_ms, lease_ms, ordering,
       retention, concurrency, global_concurrency, group_concurrency, group_on_failure,
       rate_limit, rate_period_ms, group_rate_limit, group_rate_period_ms, shards
FROM backlog_queue WHERE name = ?1
"""

QUERIES["postgres/job_claim_fifo.sql"] = """\
-- @generated from templates/postgres/job_claim.sql by tests/templates.rs: edit the template
-- Claims up to `limit` due jobs of a queue under one new lease, FIFO: by priority, then due time,
-- then id. SKIP LOCKED: concurrent claimers pass over rows another claimer holds instead of
-- queueing on them.
-- The queue's jobs lie on `shards` claim heads (backlog_queue.shards; 1: one strict head). The
-- claim starts at a random shard and takes each shard's head in turn, in the order above,
-- until it has `limit` jobs: one index probe per shard it visits (the LATERAL subquery), so
-- it costs O(limit + shards) whatever the statistics. The count and the first shard are read
-- once into a MATERIALIZED CTE: inlined, random() would be folded into the probe and run again
-- at each shard. The shards come from a constant series cut to the count (one per possible
-- shard, 256): a series bounded by the count itself made PostgreSQL 15 spend about 10 ms on
-- every claim (against 0.15 ms) once the subquery holds FOR UPDATE.
-- Cursor: each shard's claim starts past `cursor` (three values a shard: priority, run_at,
-- id; src/cursor.rs), past the index entries that claimed and completed jobs leave
-- behind while a held snapshot keeps vacuum from removing them. Empty, or a shard beyond
-- it: from the head (a full pass).
-- @param token: i64
-- @param owner: &str
-- @param expires: i64
-- @param now: i64
-- @param queue: &str
-- @param kinds: Option<Vec<String>>
-- @param limit: i64
-- @param cursor: &[i64]
WITH heads AS MATERIALIZED (
    SELECT n, floor(random() * n)::int AS first
    FROM (SELECT CASE WHEN bool_or(paused OR global_concurrency IS NOT NULL OR rate_limit IS NOT NULL
                                    OR group_rate_limit IS NOT NULL) THEN 0
                       ELSE COALESCE(max(shards), 1) END AS n
          FROM backlog_queue WHERE name = $5) AS q
), picked AS (
    SELECT c.id
    FROM heads AS q
    CROSS JOIN generate_series(0, 255) AS s(i)
    CROSS JOIN LATERAL (
        SELECT id FROM backlog_job
        WHERE queue = $5 AND shard = (q.first + s.i) % q.n AND state = 'available' AND run_at <= $4
          AND (priority, run_at, id) > (COALESCE(($8::bigint[])[3 * ((q.first + s.i) % q.n) + 1], -32768)::smallint,
                                        COALESCE(($8::bigint[])[3 * ((q.first + s.i) % q.n) + 2], -9223372036854775807),
                                        COALESCE(($8::bigint[])[3 * ((q.first + s.i) % q.n) + 3], -9223372036854775807))
          AND ($6::text[] IS NULL OR kind = ANY($6::text[]))
        ORDER BY priority, run_at, id
        LIMIT $7
        FOR UPDATE SKIP LOCKED
    ) AS c
    WHERE s.i < q.n
    LIMIT $7
)
UPDATE backlog_job j
SET state = 'running', attempt = j.attempt + 1, lease_token = $1, lease_owner = $2,
    lease_expires_at = $3, attempted_at = $4
WHERE j.id = ANY(ARRAY(SELECT id FROM picked))
-- Not the queue, token or lease expiry: the claimer chose them.
RETURNING
    j.id, j.kind, j.payload::text AS payload, j.priority, j.attempt, j.max_attempts,
    j.run_at, j.created_at, j.trace_context, j.group_key, j.shard
"""
QUERIES["postgres/job_claim_lifo.sql"] = """\
-- @generated from templates/postgres/job_claim.sql by tests/templates.rs: edit the template
-- Claims up to `limit` due jobs of a queue under one new lease, LIFO: by priority, then latest due
-- time first. SKIP LOCKED: concurrent claimers pass over rows another claimer holds instead of
-- queueing on them.
-- Shards: taken as job_claim_fifo takes them, from a random shard, each shard's head in turn.
-- @param token: i64
-- @param owner: &str
-- @param expires: i64
-- @param now: i64
-- @param queue: &str
-- @param kinds: Option<Vec<String>>
-- @param limit: i64
WITH heads AS MATERIALIZED (
    SELECT n, floor(random() * n)::int AS first
    FROM (SELECT CASE WHEN bool_or(paused OR global_concurrency IS NOT NULL OR rate_limit IS NOT NULL
                                    OR group_rate_limit IS NOT NULL) THEN 0
                       ELSE COALESCE(max(shards), 1) END AS n
          FROM backlog_queue WHERE name = $5) AS q
), picked AS (
    SELECT c.id
    FROM heads AS q
    CROSS JOIN generate_series(0, 255) AS s(i)
    CROSS JOIN LATERAL (
        SELECT id FROM backlog_job
        WHERE queue = $5 AND shard = (q.first + s.i) % q.n AND state = 'available' AND run_at <= $4
          AND ($6::text[] IS NULL OR kind = ANY($6::text[]))
        ORDER BY priority, run_at DESC, id DESC
        LIMIT $7
        FOR UPDATE SKIP LOCKED
    ) AS c
    WHERE s.i < q.n
    LIMIT $7
)
UPDATE backlog_job j
SET state = 'running', attempt = j.attempt + 1, lease_token = $1, lease_owner = $2,
    lease_expires_at = $3, attempted_at = $4
WHERE j.id = ANY(ARRAY(SELECT id FROM picked))
-- Not the queue, token or lease expiry: the claimer chose them.
RETURNING
    j.id, j.kind, j.payload::text AS payload, j.priority, j.attempt, j.max_attempts,
    j.run_at, j.created_at, j.trace_context, j.group_key
"""

QUERIES["postgres/job_complete_delete.sql"] = """\
-- Completes running jobs whose lease tokens still match: deletes them, returning their ids.
-- (id, lease_token) pairs come as two parallel arrays: one statement for any batch size. The
-- primary-key scan of `id = ANY` visits (and so locks) the rows in id order, as every multi-row
-- writer here does, so concurrent completions and claim-token claimers do not deadlock (should a
-- plan ever visit them otherwise, the database reports a deadlock and the completion is retried).
-- Ids are distinct within a call; array_position finds each row's own token.
-- @param ids: &[i64]
-- @param tokens: &[i64]
DELETE FROM backlog_job
WHERE id = ANY($1::bigint[]) AND state = 'running'
  AND lease_token = ($2::bigint[])[array_position($1::bigint[], id)]
RETURNING id
"""

QUERIES["postgres/job_complete_keep.sql"] = """\
-- Completes running jobs whose lease tokens still match: marks them completed, kept, returning
-- their ids. (id, lease_token) pairs come as two parallel arrays (see job_complete_delete for the
-- lock order).
-- Kept means moved: the DELETE … RETURNING and the INSERT move exactly the completed rows into
-- backlog_job_done, atomically, out of the table that claims read and compactions copy
-- (migrations/postgres/0015_job_done.sql), into the partition of their finish time's slot
-- (version 16: a ring the leader empties whole once pruned; the slot, backlog_job_done_slot() written
-- out, is read once a statement: a call of that SQL function would be planned at every statement).
-- @param ids: &[i64]
-- @param tokens: &[i64]
-- @param now: i64
WITH gone AS (
    DELETE FROM backlog_job
    WHERE id = ANY($1::bigint[]) AND state = 'running'
      AND lease_token = ($2::bigint[])[array_position($1::bigint[], id)]
    RETURNING *
)
INSERT INTO backlog_job_done
    (id, queue, kind, payload, state, priority, run_at, attempt, max_attempts, lease_token,
     lease_owner, lease_expires_at, unique_key, errors, result, progress, created_at,
     attempted_at, finished_at, cancel_requested_at, trace_context, group_key, shard,
     slot)
SELECT id, queue, kind, payload, 'completed', priority, run_at, attempt, max_attempts, NULL,
       lease_owner, NULL, unique_key, errors, result, progress, created_at,
       attempted_at, $3, cancel_requested_at, trace_context, group_key, shard,
       (SELECT (($3 / period_us) % 16)::smallint FROM backlog_job_done_ring)
FROM gone
RETURNING id
"""

QUERIES["postgres/job_complete_archive.sql"] = """\
-- Completes running jobs whose lease tokens still match: moves them to the archive, returning their
-- ids. One statement: the CTE deletes the rows and the INSERT moves exactly those, atomically. (id,
-- lease_token) pairs come as two parallel arrays (see job_complete_delete for the lock order).
-- @param ids: &[i64]
-- @param tokens: &[i64]
-- @param now: i64
WITH moved AS (
    DELETE FROM backlog_job
    WHERE id = ANY($1::bigint[]) AND state = 'running'
      AND lease_token = ($2::bigint[])[array_position($1::bigint[], id)]
    RETURNING *
)
INSERT INTO backlog_job_archive
    (id, queue, kind, payload, state, priority, run_at, attempt, max_attempts, lease_token,
     lease_owner, lease_expires_at, unique_key, errors, result, progress, created_at,
     attempted_at, finished_at, cancel_requested_at, trace_context, group_key)
SELECT id, queue, kind, payload, 'completed', priority, run_at, attempt, max_attempts, NULL,
       lease_owner, NULL, unique_key, errors, result, progress, created_at, attempted_at, $3,
       cancel_requested_at, trace_context, group_key
FROM moved
RETURNING id
"""

QUERIES["postgres/job_fail.sql"] = """\
-- Casts: $3 may be NULL, and jsonb_build_object takes "any" so its arguments need a type.
-- @param state: &str
-- @param run_at: i64
-- @param finished_at: Option<i64>
-- @param now: i64
-- @param error: &str
-- @param id: i64
-- @param token: i64
-- A failed job of an ordered group whose queue lets the group go on (group_on_failure 'next')
-- waits for its group's turn again instead of holding its group's place while it waits to retry.
UPDATE backlog_job
SET state = CASE WHEN $1 = 'available' AND group_key IS NOT NULL
                  AND (SELECT q.group_on_failure FROM backlog_queue q WHERE q.name = queue) = 'next'
             THEN 'waiting' ELSE $1 END,
    run_at = $2, finished_at = $3::bigint, lease_token = NULL, lease_expires_at = NULL,
    errors = errors || jsonb_build_array(
        jsonb_build_object('attempt', attempt, 'at', $4::bigint, 'error', $5::text))
WHERE id = $6 AND lease_token = $7 AND state = 'running'
"""

QUERIES["postgres/job_heartbeat.sql"] = """\
-- Also tells the worker whether cancellation of the job was requested.
-- @param expires: i64
-- @param id: i64
-- @param token: i64
UPDATE backlog_job SET lease_expires_at = $1
WHERE id = $2 AND lease_token = $3 AND state = 'running'
RETURNING cancel_requested_at IS NOT NULL AS cancel_requested
"""

QUERIES["postgres/job_release.sql"] = """\
-- Back to available without consuming the attempt the claim counted.
-- @param run_at: i64
-- @param id: i64
-- @param token: i64
UPDATE backlog_job
SET state = 'available', attempt = GREATEST(attempt - 1, 0), run_at = $1,
    lease_token = NULL, lease_expires_at = NULL
WHERE id = $2 AND lease_token = $3 AND state = 'running'
"""

QUERIES["postgres/job_rescue.sql"] = """\
-- Expired leases: back to available, or dead when the attempt that died was the last one.
-- Returns the queue of each job rescued and whether it ended dead (for the per-queue counts).
-- SKIP LOCKED: a row held open by a transaction-mode claimer or another rescuer is passed over;
-- the outer WHERE rechecks state and expiry on the row as it is once locked. = ANY(ARRAY(…)): the
-- batch is locked once (an InitPlan); `id IN (SELECT … LIMIT … FOR UPDATE)` may be rescanned per
-- outer row, each rescan locking more rows than the limit.
-- After: the rescue's floor (src/cursor.rs): only leases that expired since the last complete
-- pass, past the index entries of finished jobs that a held snapshot keeps vacuum from
-- removing; the smallest bigint for a full pass.
-- @param now: i64
-- @param limit: i64
-- @param after: i64
UPDATE backlog_job
SET state = CASE WHEN attempt >= COALESCE(max_attempts,
                     (SELECT q.max_attempts FROM backlog_queue q WHERE q.name = backlog_job.queue), 25)
                 THEN 'dead' ELSE 'available' END,
    finished_at = CASE WHEN attempt >= COALESCE(max_attempts,
                     (SELECT q.max_attempts FROM backlog_queue q WHERE q.name = backlog_job.queue), 25)
                 THEN $1::bigint ELSE NULL END,
    run_at = $1,
    errors = errors || jsonb_build_array(jsonb_build_object('attempt', attempt, 'at', $1::bigint,
             'error', 'lease expired (worker ' || COALESCE(lease_owner, '?') || ' stopped heartbeating)')),
    lease_token = NULL, lease_expires_at = NULL
WHERE id = ANY(ARRAY(
    SELECT id FROM backlog_job
    WHERE state = 'running' AND lease_expires_at < $1 AND lease_expires_at >= $3
    ORDER BY lease_expires_at
    LIMIT $2
    FOR UPDATE SKIP LOCKED
))
AND state = 'running' AND lease_expires_at < $1
RETURNING queue, state = 'dead' AS dead
"""

QUERIES["postgres/queue_get.sql"] = """\
-- @param name: &str
SELECT name, paused, max_attempts, backoff_base_ms, backoff_max_ms, lease_ms, ordering,
       retention, concurrency, global_concurrency, group_concurrency, group_on_failure,
       rate_limit, rate_period_ms, group_rate_limit, group_rate_period_ms, shards
FROM backlog_queue WHERE name = $1
"""

QUERIES["mysql/job_claim_fifo.sql"] = """\
-- @generated from templates/mysql/job_claim.sql by tests/templates.rs: edit the template
-- SKIP LOCKED: concurrent claimers pass over each other's rows; job_claim_update takes these in
-- the same transaction (no UPDATE … RETURNING in MySQL), so the SELECT returns what it will write.
-- One shard of the queue's claim point per statement (the claimer walks the shards from a random
-- one; see claim_with in mysql.rs). FORCE INDEX: the claim index whatever the statistics say (a
-- scan would lock far more rows). Not the queue, token or lease expiry: the claimer chose them.
-- By priority, then the oldest due first (FIFO).
-- After: the shard's claim cursor (src/cursor.rs), the key `(priority, run_at, id)` past
-- which it starts, past the delete-marked entries a held snapshot keeps purge from
-- removing; NULL: from the head (a full pass). Written out with OR, which the range
-- optimizer reads as ranges of the claim index.
-- @param queue: &str
-- @param shard: i32
-- @param now: i64
-- @param kinds: Option<&str>
-- @param limit: i64
-- @param after_priority: Option<i16>
-- @param after_run_at: Option<i64>
-- @param after_id: Option<i64>
-- @bind queue, shard, now, kinds, kinds, after_priority, after_priority, after_priority, after_run_at, after_run_at, after_id, queue, limit
SELECT
    id, kind, CAST(payload AS CHAR) AS payload, priority, attempt + 1 AS attempt,
    max_attempts, run_at, created_at, trace_context, group_key
FROM backlog_job FORCE INDEX (backlog_job_shard_claim)
WHERE queue = ? AND state = 'available' AND shard = ? AND run_at <= ?
  AND (? IS NULL OR JSON_CONTAINS(?, JSON_QUOTE(kind)))
  AND (? IS NULL OR priority > ? OR (priority = ? AND (run_at > ? OR (run_at = ? AND id > ?))))
  AND NOT EXISTS (SELECT 1 FROM backlog_queue WHERE name = ? AND (paused OR global_concurrency IS NOT NULL
                                                                  OR rate_limit IS NOT NULL OR group_rate_limit IS NOT NULL))
ORDER BY priority, run_at, id
LIMIT ?
FOR UPDATE SKIP LOCKED
"""
QUERIES["mysql/job_claim_lifo.sql"] = """\
-- @generated from templates/mysql/job_claim.sql by tests/templates.rs: edit the template
-- SKIP LOCKED: concurrent claimers pass over each other's rows; job_claim_update takes these in
-- the same transaction (no UPDATE … RETURNING in MySQL), so the SELECT returns what it will write.
-- One shard of the queue's claim point per statement (the claimer walks the shards from a random
-- one; see claim_with in mysql.rs). FORCE INDEX: the claim index whatever the statistics say (a
-- scan would lock far more rows). Not the queue, token or lease expiry: the claimer chose them.
-- By priority, then the newest due first (LIFO).
-- @param queue: &str
-- @param shard: i32
-- @param now: i64
-- @param kinds: Option<&str>
-- @param limit: i64
-- @bind queue, shard, now, kinds, kinds, queue, limit
SELECT
    id, kind, CAST(payload AS CHAR) AS payload, priority, attempt + 1 AS attempt,
    max_attempts, run_at, created_at, trace_context, group_key
FROM backlog_job FORCE INDEX (backlog_job_shard_claim)
WHERE queue = ? AND state = 'available' AND shard = ? AND run_at <= ?
  AND (? IS NULL OR JSON_CONTAINS(?, JSON_QUOTE(kind)))
  AND NOT EXISTS (SELECT 1 FROM backlog_queue WHERE name = ? AND (paused OR global_concurrency IS NOT NULL
                                                                  OR rate_limit IS NOT NULL OR group_rate_limit IS NOT NULL))
ORDER BY priority, run_at DESC, id DESC
LIMIT ?
FOR UPDATE SKIP LOCKED
"""

QUERIES["mysql/job_claim_update.sql"] = """\
-- The rows job_claim locked in this transaction. FORCE INDEX: on a small table the
-- optimizer scans instead, waiting on rows other workers hold.
-- @param token: i64
-- @param owner: &str
-- @param expires: i64
-- @param now: i64
-- @list IDS ids: i64
UPDATE backlog_job FORCE INDEX (PRIMARY)
SET state = 'running', attempt = attempt + 1, lease_token = ?, lease_owner = ?,
    lease_expires_at = ?, attempted_at = ?
WHERE id IN (/*IDS*/)
"""

QUERIES["mysql/job_complete_delete_fenced.sql"] = """\
-- The common case in one statement: the jobs of one lease token (a claim gives its whole batch
-- one token), fenced by it. FORCE INDEX (PRIMARY): rows are found and locked in id order, never
-- by a scan. Multi-table syntax because single-table DELETE takes no index hint.
-- Not a job with dependents (schema version 20): its children are released in the same
-- transaction, which this statement alone is not; the caller completes those in one.
-- @list IDS ids: i64
-- @param token: i64
DELETE backlog_job FROM backlog_job FORCE INDEX (PRIMARY)
WHERE id IN (/*IDS*/) AND lease_token = ? AND state = 'running' AND NOT has_dependents
"""

QUERIES["mysql/job_complete_lock.sql"] = """\
-- No RETURNING in MySQL: lock the rows first to learn which hold the caller's token. FORCE INDEX:
-- on a small table the optimizer scans instead, locking rows other workers hold (deadlocks).
-- @list IDS ids: i64
SELECT id, lease_token, state, has_dependents FROM backlog_job FORCE INDEX (PRIMARY) WHERE id IN (/*IDS*/) FOR UPDATE
"""

QUERIES["mysql/job_complete_archive.sql"] = """\
-- Rows job_complete_lock found running with the caller's token (FORCE INDEX: see there); they
-- are deleted afterwards.
-- @param now: i64
-- @list IDS ids: i64
INSERT INTO backlog_job_archive
    (id, queue, kind, payload, state, priority, run_at, attempt, max_attempts, lease_token,
     lease_owner, lease_expires_at, unique_key, errors, result, progress, created_at,
     attempted_at, finished_at, cancel_requested_at, trace_context, group_key)
SELECT id, queue, kind, payload, 'completed', priority, run_at, attempt, max_attempts, NULL,
       lease_owner, NULL, unique_key, errors, result, progress, created_at, attempted_at, ?,
       cancel_requested_at, trace_context, group_key
FROM backlog_job FORCE INDEX (PRIMARY)
WHERE id IN (/*IDS*/)
"""

QUERIES["mysql/job_complete_keep.sql"] = """\
-- Rows job_complete_lock found running with the caller's token (still locked; FORCE INDEX: see
-- there), kept: copied, completed, into the ring table completions write now (the view
-- backlog_job_done_current, turned by the leader; migrations/mysql/0017_job_done_ring.sql);
-- job_complete_delete removes them from the job table after, in the same transaction.
-- @param now: i64
-- @list IDS ids: i64
INSERT INTO backlog_job_done_current
    (id, queue, kind, payload, state, priority, run_at, attempt, max_attempts, lease_token,
     lease_owner, lease_expires_at, unique_key, errors, result, progress, created_at,
     attempted_at, finished_at, cancel_requested_at, trace_context, group_key, shard)
SELECT id, queue, kind, payload, 'completed', priority, run_at, attempt, max_attempts, NULL,
       lease_owner, NULL, unique_key, errors, result, progress, created_at, attempted_at, ?,
       cancel_requested_at, trace_context, group_key, shard
FROM backlog_job FORCE INDEX (PRIMARY)
WHERE id IN (/*IDS*/)
"""

QUERIES["mysql/job_complete_delete.sql"] = """\
-- Rows job_complete_lock found running with the caller's token (still locked). Multi-table
-- syntax because single-table DELETE takes no index hint (see job_complete_lock for why).
-- @list IDS ids: i64
DELETE backlog_job FROM backlog_job FORCE INDEX (PRIMARY) WHERE id IN (/*IDS*/)
"""

QUERIES["mysql/job_fail.sql"] = """\
-- errors first: MySQL evaluates SET left to right with the values already assigned.
-- @param state: &str
-- @param run_at: i64
-- @param finished_at: Option<i64>
-- @param now: i64
-- @param error: &str
-- @param id: i64
-- @param token: i64
-- @bind now, error, state, state, run_at, finished_at, id, token
-- A failed job of an ordered group whose queue lets the group go on (group_on_failure 'next')
-- waits for its group's turn again instead of holding its group's place while it waits to retry.
UPDATE backlog_job
SET errors = JSON_ARRAY_APPEND(errors, '$', JSON_OBJECT('attempt', attempt, 'at', ?, 'error', ?)),
    state = CASE WHEN ? = 'available' AND group_key IS NOT NULL
                  AND (SELECT q.group_on_failure FROM backlog_queue q WHERE q.name = queue) = 'next'
             THEN 'waiting' ELSE ? END,
    run_at = ?, finished_at = ?, lease_token = NULL, lease_expires_at = NULL
WHERE id = ? AND lease_token = ? AND state = 'running'
"""

QUERIES["mysql/job_heartbeat.sql"] = """\
-- No RETURNING in MySQL: job_heartbeat_cancel reads the cancel flag after this.
-- @param expires: i64
-- @param id: i64
-- @param token: i64
UPDATE backlog_job SET lease_expires_at = ?
WHERE id = ? AND lease_token = ? AND state = 'running'
"""

QUERIES["mysql/job_heartbeat_cancel.sql"] = """\
-- Whether cancellation of the job was requested, read after job_heartbeat (fenced again: no row
-- means the lease was lost in between).
-- @param id: i64
-- @param token: i64
SELECT cancel_requested_at IS NOT NULL AS cancel_requested
FROM backlog_job WHERE id = ? AND lease_token = ? AND state = 'running'
"""

QUERIES["mysql/job_release.sql"] = """\
-- Back to available without consuming the attempt the claim counted.
-- @param run_at: i64
-- @param id: i64
-- @param token: i64
UPDATE backlog_job
SET state = 'available', attempt = GREATEST(attempt - 1, 0), run_at = ?,
    lease_token = NULL, lease_expires_at = NULL
WHERE id = ? AND lease_token = ? AND state = 'running'
"""

QUERIES["mysql/job_rescue_ids.sql"] = """\
-- Expired leases, oldest first, locked for job_rescue in the same transaction. SKIP LOCKED: a row
-- held open by a transaction-mode claimer (or another rescuer) is passed over instead of waited
-- on; a plain UPDATE … ORDER BY … LIMIT scanned into it and stalled every claimer's rescue.
-- After: the rescue's floor (src/cursor.rs): only leases that expired since the last complete
-- pass, past the delete-marked entries of finished jobs that a held snapshot keeps purge from
-- removing; the smallest BIGINT for a full pass.
-- Two steps in one statement, as in job_claim_fifo: the derived table reads the lease index
-- without locking (a locking read there checks every delete-marked entry for an implicit
-- lock), then the rows are locked by primary key in expiry order and rechecked; STRAIGHT_JOIN
-- and the order by `c`'s column stop the locking at the LIMIT.
-- @param now: i64
-- @param after: i64
-- @param limit: i64
-- @bind now, after, limit, now, limit
SELECT j.id FROM (
    SELECT lease_expires_at, id FROM backlog_job FORCE INDEX (backlog_job_lease)
    WHERE state = 'running' AND lease_expires_at < ? AND lease_expires_at >= ?
    ORDER BY lease_expires_at
    LIMIT ?
) AS c
STRAIGHT_JOIN backlog_job AS j FORCE INDEX (PRIMARY) ON j.id = c.id
WHERE j.state = 'running' AND j.lease_expires_at < ?
ORDER BY c.lease_expires_at
LIMIT ?
FOR UPDATE SKIP LOCKED
"""

QUERIES["mysql/job_rescue.sql"] = """\
-- Expired leases that job_rescue_ids locked: back to available, or dead when the
-- attempt that died was the last one. errors first (SET runs left to right); the CASE is repeated
-- rather than reading the new state, which MariaDB's SIMULTANEOUS_ASSIGNMENT mode would not see.
-- The WHERE rechecks state and expiry on the locked rows.
-- @param now: i64
-- @list IDS ids: i64
-- @bind now, now, now, ids, now
UPDATE backlog_job FORCE INDEX (PRIMARY)
SET errors = JSON_ARRAY_APPEND(errors, '$', JSON_OBJECT('attempt', attempt, 'at', ?,
             'error', CONCAT('lease expired (worker ', COALESCE(lease_owner, '?'),
                             ' stopped heartbeating)'))),
    state = CASE WHEN attempt >= COALESCE(max_attempts,
                     (SELECT q.max_attempts FROM backlog_queue q WHERE q.name = backlog_job.queue), 25)
                 THEN 'dead' ELSE 'available' END,
    finished_at = CASE WHEN attempt >= COALESCE(max_attempts,
                     (SELECT q.max_attempts FROM backlog_queue q WHERE q.name = backlog_job.queue), 25)
                 THEN ? ELSE NULL END,
    run_at = ?, lease_token = NULL, lease_expires_at = NULL
WHERE id IN (/*IDS*/) AND state = 'running' AND lease_expires_at < ?
"""

QUERIES["mysql/queue_get.sql"] = """\
-- @param name: &str
SELECT name, paused, max_attempts, backoff_base_ms, backoff_max_ms, lease_ms, ordering,
       retention, concurrency, global_concurrency, group_concurrency, group_on_failure,
       rate_limit, rate_period_ms, group_rate_limit, group_rate_period_ms, shards
FROM backlog_queue WHERE name = ?
"""

QUERIES["mysql/queue_shards.sql"] = """\
-- How many shards a queue's claim point has (1 when the queue has no settings row): where
-- inserts put its jobs and which heads a claim walks.
-- @param queue: &str
SELECT COALESCE(MAX(shards), 1) FROM backlog_queue WHERE name = ?
"""

QUERIES["sqlite/schema_version.sql"] = """\
-- The schema version: the last migration applied (0 before the first).
SELECT COALESCE(MAX(version), 0) AS version FROM backlog_migration
"""

QUERIES["postgres/schema_version.sql"] = """\
-- The schema version: the last migration applied (0 before the first).
SELECT COALESCE(MAX(version), 0) AS version FROM backlog_migration
"""

QUERIES["mysql/schema_version.sql"] = """\
-- The schema version: the last migration applied (0 before the first).
SELECT COALESCE(MAX(version), 0) AS version FROM backlog_migration
"""

QUERIES["sqlite/job_find_unique.sql"] = """\
-- The unfinished job that holds a unique key in a queue.
-- @param queue: &str
-- @param unique_key: &str
SELECT id FROM backlog_job
WHERE queue = ?1 AND unique_key = ?2 AND state IN ('available', 'running', 'held', 'waiting')
"""

QUERIES["postgres/job_find_unique.sql"] = """\
-- @param queue: &str
-- @param unique_key: &str
SELECT id FROM backlog_job
WHERE queue = $1 AND unique_key = $2 AND state IN ('available', 'running', 'held', 'waiting')
"""

QUERIES["mysql/job_find_unique.sql"] = """\
-- unique_active is the unique key while the job is unfinished, else NULL (no partial indexes).
-- A locking read: it sees the latest committed row even in a caller's REPEATABLE READ transaction
-- whose snapshot predates it (job_insert's duplicate check already locked that row).
-- @param queue: &str
-- @param unique_key: &str
SELECT id FROM backlog_job WHERE queue = ? AND unique_active = ? FOR UPDATE
"""

QUERIES["sqlite/db_now.sql"] = """\
-- The clock "now" column defaults use, in microseconds since the epoch: on SQLite, the system
-- clock of the machine that holds the file. Clients measure their offset from it (see
-- docs/state-machine.md, "Time"). SQLite's clock ticks in whole milliseconds (the defaults'
-- values are whole milliseconds, give or take the float's 50 us): read as the last microsecond
-- of its millisecond, so a client's time is never behind the defaults' (a job a plain INSERT
-- just made is due at once), and at most a millisecond ahead.
SELECT CAST(ROUND((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER) * 1000 + 999 AS now
"""

QUERIES["postgres/db_now.sql"] = """\
-- The database's clock, in microseconds since the epoch: the same expression as the "now"
-- column defaults. Clients measure their offset from it (see docs/state-machine.md, "Time").
SELECT CAST(EXTRACT(EPOCH FROM clock_timestamp()) * 1000000 AS BIGINT) AS now
"""

QUERIES["mysql/db_now.sql"] = """\
-- The database's clock, in microseconds since the epoch: the same expression as the "now"
-- column defaults. Clients measure their offset from it (see docs/state-machine.md, "Time").
SELECT CAST(UNIX_TIMESTAMP(NOW(6)) * 1000000 AS SIGNED) AS now
"""

# The producer's batches (enqueue_many): one statement per 1,000 jobs.
QUERIES["sqlite/job_insert.sql"] = """\
-- Multi-row insert, one row of values per job. A taken unique key inserts nothing.
-- @rows ROWS rows: (&str, Option<&str>, &str, i16, i64, Option<i32>, Option<String>, Option<&str>, i64)
INSERT INTO backlog_job
    (queue, kind, payload, priority, run_at, max_attempts, trace_context, unique_key, created_at)
VALUES /*ROWS*/
ON CONFLICT (queue, unique_key) WHERE unique_key IS NOT NULL AND state IN ('available', 'running', 'held', 'waiting')
DO NOTHING
RETURNING id, queue, unique_key
"""
QUERIES["sqlite/job_insert_plain.sql"] = """\
-- Multi-row insert of rows without unique keys: every row goes in, so the new ids are the
-- statement's last rowid and the ones before it (one statement holds the write lock, and
-- AUTOINCREMENT hands out consecutive ids), and nothing needs returning.
-- @rows ROWS rows: (&str, Option<&str>, &str, i16, i64, Option<i32>, Option<String>, i64)
INSERT INTO backlog_job (queue, kind, payload, priority, run_at, max_attempts, trace_context, created_at)
VALUES /*ROWS*/
"""
QUERIES["sqlite/job_insert_uniform.sql"] = """\
-- Rows that differ only in their payload (the usual batch: one queue, kind, priority and time),
-- without unique keys: the shared values are bound once, and the payloads travel as one JSON
-- array of strings (`payloads`), unpacked in order by json_each: eight values to bind for any
-- number of rows. (Numbered placeholders reused per row would be fewer still in the text, but the
-- driver asks SQLite for each placeholder's name, a linear search per placeholder.) Ids as in
-- job_insert_plain: one statement, consecutive.
-- @param queue: &str
-- @param kind: Option<&str>
-- @param priority: i16
-- @param run_at: i64
-- @param max_attempts: Option<i32>
-- @param now: i64
-- @param payloads: String
-- @param trace_context: Option<String>
INSERT INTO backlog_job (queue, kind, payload, priority, run_at, max_attempts, trace_context, created_at)
SELECT ?1, ?2, p.value, ?3, ?4, ?5, ?8, ?6
FROM json_each(?7) AS p
ORDER BY p.key
"""
QUERIES["sqlite/job_group_set.sql"] = """\
-- Puts a just-inserted job in its ordered group: waiting, until group_promote (in the same
-- transaction) makes it available if it is its turn. No claimer saw it available: the insert
-- is not committed yet.
-- @param group: &str
-- @param id: i64
UPDATE backlog_job SET group_key = ?1, state = 'waiting' WHERE id = ?2
"""
QUERIES["postgres/job_insert.sql"] = """\
-- One statement per chunk: rows come as parallel arrays, inserted in ordinality order so ids
-- follow input order. A taken unique key inserts nothing.
-- Each job's shard: at random below its queue's `shards` (0 when the queue has no row or one shard).
-- @param queues: Vec<Option<String>>
-- @param kinds: Vec<Option<String>>
-- @param payloads: Vec<Option<String>>
-- @param priorities: Vec<i16>
-- @param run_ats: Vec<i64>
-- @param max_attempts: Vec<Option<i32>>
-- @param trace_contexts: Vec<Option<String>>
-- @param unique_keys: Vec<Option<String>>
-- @param now: i64
INSERT INTO backlog_job
    (queue, kind, payload, priority, run_at, max_attempts, trace_context, unique_key, created_at,
     shard)
SELECT q, k, p::jsonb, pr, ra, ma, tc, uk, $9, COALESCE(floor(random() * bq.shards), 0)
FROM UNNEST($1::text[], $2::text[], $3::text[], $4::smallint[], $5::bigint[], $6::int[],
            $7::text[], $8::text[])
     WITH ORDINALITY AS t(q, k, p, pr, ra, ma, tc, uk, ord)
     LEFT JOIN backlog_queue AS bq ON bq.name = t.q
ORDER BY ord
ON CONFLICT (queue, unique_key) WHERE unique_key IS NOT NULL AND state IN ('available', 'running', 'held', 'waiting')
DO NOTHING
RETURNING id, queue, unique_key
"""
QUERIES["postgres/job_insert_plain.sql"] = """\
-- Rows without unique keys: every row goes in, so nothing can conflict and only ids come back,
-- in input order (rows are inserted in ordinality order and ids come from one sequence), as one
-- array in one row (see job_insert_uniform).
-- Each job's shard: at random below its queue's `shards` (0 when the queue has no row or one shard).
-- @param queues: Vec<Option<String>>
-- @param kinds: Vec<Option<String>>
-- @param payloads: Vec<Option<String>>
-- @param priorities: Vec<i16>
-- @param run_ats: Vec<i64>
-- @param max_attempts: Vec<Option<i32>>
-- @param trace_contexts: Vec<Option<String>>
-- @param now: i64
WITH ins AS (
    INSERT INTO backlog_job (queue, kind, payload, priority, run_at, max_attempts, trace_context, created_at,
                             shard)
    SELECT q, k, p::jsonb, pr, ra, ma, tc, $8, COALESCE(floor(random() * bq.shards), 0)
    FROM UNNEST($1::text[], $2::text[], $3::text[], $4::smallint[], $5::bigint[], $6::int[],
                $7::text[])
         WITH ORDINALITY AS t(q, k, p, pr, ra, ma, tc, ord)
         LEFT JOIN backlog_queue AS bq ON bq.name = t.q
    ORDER BY ord
    RETURNING id
)
SELECT array_agg(id) FROM ins
"""
QUERIES["postgres/job_insert_uniform.sql"] = """\
-- Rows that differ only in their payload (the usual batch: one queue, kind, priority and time),
-- without unique keys: the shared values go once and only the payloads as an array, so neither
-- side encodes or decodes five arrays of one repeated value. Ids follow input order as in
-- job_insert_plain, and come back as one array in one row: a row per id cost the client more
-- CPU than the rest of the enqueue (a message, a row and a decode each).
-- Each job's shard: at random below its queue's `shards` (0 when the queue has no row or one shard).
-- @param queue: &str
-- @param kind: Option<&str>
-- @param priority: i16
-- @param run_at: i64
-- @param max_attempts: Option<i32>
-- @param now: i64
-- @param payloads: Vec<&str>
-- @param trace_context: Option<String>
WITH ins AS (
    INSERT INTO backlog_job (queue, kind, payload, priority, run_at, max_attempts, trace_context, created_at,
                             shard)
    SELECT $1, $2, p::jsonb, $3, $4, $5, $8, $6, floor(random() * n.shards)
    FROM UNNEST($7::text[]) WITH ORDINALITY AS t(p, ord),
         (SELECT COALESCE(max(shards), 1) AS shards FROM backlog_queue WHERE name = $1) AS n
    ORDER BY ord
    RETURNING id
)
SELECT array_agg(id) FROM ins
"""
QUERIES["postgres/job_group_set.sql"] = """\
-- Puts just-inserted jobs in their ordered groups: waiting, until group_promote (in the same
-- transaction) makes those whose turn it is available. No claimer saw them available: the
-- insert is not committed yet.
-- @param ids: &[i64]
-- @param groups: Vec<String>
UPDATE backlog_job j SET group_key = t.g, state = 'waiting'
FROM unnest($1::bigint[], $2::text[]) AS t(id, g)
WHERE j.id = t.id
"""
QUERIES["mysql/job_insert.sql"] = """\
-- Multi-row insert. A taken unique key inserts nothing (a no-op update, not
-- INSERT IGNORE, which would also swallow other errors). lease_token carries a marker that
-- job_insert_created reads the new ids by (no RETURNING in MySQL).
-- Each job's shard: at random below its queue's `shards` (the Rust side picks it).
-- @rows ROWS rows: (&str, Option<&str>, &str, i16, i64, Option<i32>, Option<String>, Option<&str>, i64, i64, i16)
INSERT INTO backlog_job
    (queue, kind, payload, priority, run_at, max_attempts, trace_context, unique_key, created_at,
     lease_token, shard)
VALUES /*ROWS*/
ON DUPLICATE KEY UPDATE id = id
"""
QUERIES["mysql/job_insert_plain.sql"] = """\
-- Rows without unique keys, when one statement's ids are consecutive (auto-increment lock mode 0
-- or 1): every row goes in, so nothing can conflict and no marker is needed to find the new ids.
-- Each job's shard: at random below its queue's `shards` (the Rust side picks it).
-- @rows ROWS rows: (&str, Option<&str>, &str, i16, i64, Option<i32>, Option<String>, i64, i16)
INSERT INTO backlog_job (queue, kind, payload, priority, run_at, max_attempts, trace_context, created_at,
                         shard)
VALUES /*ROWS*/
"""
QUERIES["mysql/job_group_set.sql"] = """\
-- Puts a just-inserted job in its ordered group: waiting, until group_next and
-- group_make_available (in the same transaction) make it available if it is its turn. No
-- claimer saw it available: the insert is not committed yet.
-- @param group: &str
-- @param id: i64
UPDATE backlog_job SET group_key = ?, state = 'waiting' WHERE id = ?
"""
QUERIES["mysql/job_insert_created.sql"] = """\
-- The rows job_insert created: ids from the statement's first id up, carrying its marker.
-- @param first_id: i64
-- @param marker: i64
SELECT id, queue, unique_key FROM backlog_job FORCE INDEX (PRIMARY)
WHERE id >= ? AND lease_token = ? ORDER BY id
"""
QUERIES["mysql/job_insert_unmark.sql"] = """\
-- Clears job_insert's marker before the transaction commits, on the ids job_insert_created
-- found: an open range would take next-key locks up to the end of the table in a
-- caller's REPEATABLE READ transaction, blocking every other producer until it commits.
-- @list IDS ids: i64
UPDATE backlog_job FORCE INDEX (PRIMARY) SET lease_token = NULL WHERE id IN (/*IDS*/)
"""
QUERIES["mysql/db_autoinc.sql"] = """\
-- The auto-increment lock mode and step, read at connect: in lock mode 0 or 1 the ids of one
-- multi-row INSERT are consecutive, `step` apart (job_insert_plain relies on it).
SELECT CAST(@@innodb_autoinc_lock_mode AS SIGNED), CAST(@@auto_increment_increment AS SIGNED)
"""

# A consumer's completions and its next claim in one statement (PostgreSQL).
QUERIES["postgres/job_complete_then_claim_keep_fifo.sql"] = """\
-- @generated from templates/postgres/job_complete_claim.sql by tests/templates.rs: edit the template
-- Completes a worker's finished jobs and claims its next ones in one statement and one commit.
-- Returns a row per claimed job (done_ids NULL), then one more row whose done_ids are the
-- completed ids (NULL when none) and whose other columns are NULL. A UNION ALL row costs the
-- database less than joining the ids onto the claimed rows (scripts/pg_claim_costs.py). Both
-- parts see one snapshot and touch disjoint rows (the completed jobs are running under the
-- caller's tokens; the claimed ones available).
-- The completed jobs are kept (moved to backlog_job_done, below).
-- Each ran under its own lease token (`done_tokens`, in the order of `done_ids`).
-- Order: FIFO, by priority, then due time, then id.
-- Shards: taken as job_claim_fifo takes them, from a random shard, each shard's head in turn.
-- Lock waits: 50 ms at most (lock_timeout, for this statement's transaction alone), then the
-- statement fails with 55P03 and the caller runs it again. A claim's SKIP LOCKED does not
-- skip everything: reaching a row whose newer version another claimer is deleting, it
-- waits for that claimer, which may be waiting to delete a row this one just locked; such a
-- deadlock held both for deadlock_timeout (1 s by default) before one gave way. `heads` is
-- read before any row is locked: the claim reads it first, and the completion comes after
-- the claim's pick (it waits for picked, or follows claimed in the UNION ALL).
-- Cursor: each shard's claim starts past `cursor` (three values a shard: priority, run_at,
-- id; src/cursor.rs), past the index entries that claimed and completed jobs leave
-- behind while a held snapshot keeps vacuum from removing them. Empty, or a shard beyond
-- it: from the head (a full pass).
-- Kept means moved: the DELETE … RETURNING and the INSERT move exactly the completed rows into
-- backlog_job_done, atomically, out of the table that claims read and compactions copy
-- (migrations/postgres/0015_job_done.sql).
-- @param token: i64
-- @param owner: &str
-- @param expires: i64
-- @param now: i64
-- @param queue: &str
-- @param kinds: Option<Vec<String>>
-- @param limit: i64
-- @param done_ids: &[i64]
-- @param done_tokens: &[i64]
-- @param done_now: i64
-- @param cursor: &[i64]
WITH gone AS (
    DELETE FROM backlog_job
    WHERE id = ANY($8::bigint[]) AND state = 'running'
      AND lease_token = ($9::bigint[])[array_position($8::bigint[], id)]
    RETURNING *
), done AS (
    INSERT INTO backlog_job_done
        (id, queue, kind, payload, state, priority, run_at, attempt, max_attempts, lease_token,
         lease_owner, lease_expires_at, unique_key, errors, result, progress, created_at,
         attempted_at, finished_at, cancel_requested_at, trace_context, group_key, shard,
         slot)
    SELECT id, queue, kind, payload, 'completed', priority, run_at, attempt, max_attempts, NULL,
           lease_owner, NULL, unique_key, errors, result, progress, created_at,
           attempted_at, $10, cancel_requested_at, trace_context, group_key, shard,
           (SELECT (($10 / period_us) % 16)::smallint FROM backlog_job_done_ring)
    FROM gone
    RETURNING id
), heads AS MATERIALIZED (
    SELECT n, floor(random() * n)::int AS first,
           set_config('lock_timeout', '50ms', true) AS lock_timeout
    FROM (SELECT CASE WHEN bool_or(paused OR global_concurrency IS NOT NULL OR rate_limit IS NOT NULL
                                    OR group_rate_limit IS NOT NULL) THEN 0
                       ELSE COALESCE(max(shards), 1) END AS n
          FROM backlog_queue WHERE name = $5) AS q
), picked AS (
    SELECT c.id
    FROM heads AS q
    CROSS JOIN generate_series(0, 255) AS s(i)
    CROSS JOIN LATERAL (
        SELECT id FROM backlog_job
        WHERE queue = $5 AND shard = (q.first + s.i) % q.n AND state = 'available' AND run_at <= $4
          AND (priority, run_at, id) > (COALESCE(($11::bigint[])[3 * ((q.first + s.i) % q.n) + 1], -32768)::smallint,
                                        COALESCE(($11::bigint[])[3 * ((q.first + s.i) % q.n) + 2], -9223372036854775807),
                                        COALESCE(($11::bigint[])[3 * ((q.first + s.i) % q.n) + 3], -9223372036854775807))
          AND ($6::text[] IS NULL OR kind = ANY($6::text[]))
        ORDER BY priority, run_at, id
        LIMIT $7
        FOR UPDATE SKIP LOCKED
    ) AS c
    WHERE s.i < q.n
    LIMIT $7
),
claimed AS (
    UPDATE backlog_job j
    SET state = 'running', attempt = j.attempt + 1, lease_token = $1, lease_owner = $2,
        lease_expires_at = $3, attempted_at = $4
    WHERE j.id = ANY(ARRAY(SELECT id FROM picked))
    RETURNING
        j.id, j.kind, j.payload::text AS payload, j.priority, j.attempt, j.max_attempts,
        j.run_at, j.created_at, j.trace_context, j.group_key, j.shard
)
SELECT NULL::bigint[] AS done_ids, c.* FROM claimed AS c
UNION ALL
SELECT d.done_ids, c.* FROM (SELECT array_agg(id) AS done_ids FROM done) AS d
LEFT JOIN claimed AS c ON false
"""
QUERIES["postgres/job_complete_then_claim_keep_lifo.sql"] = """\
-- @generated from templates/postgres/job_complete_claim.sql by tests/templates.rs: edit the template
-- Completes a worker's finished jobs and claims its next ones in one statement and one commit.
-- Returns a row per claimed job (done_ids NULL), then one more row whose done_ids are the
-- completed ids (NULL when none) and whose other columns are NULL. A UNION ALL row costs the
-- database less than joining the ids onto the claimed rows (scripts/pg_claim_costs.py). Both
-- parts see one snapshot and touch disjoint rows (the completed jobs are running under the
-- caller's tokens; the claimed ones available).
-- The completed jobs are kept (moved to backlog_job_done, below).
-- Each ran under its own lease token (`done_tokens`, in the order of `done_ids`).
-- Order: LIFO, by priority, then latest due time first.
-- Shards: taken as job_claim_fifo takes them, from a random shard, each shard's head in turn.
-- Lock waits: 50 ms at most (lock_timeout, for this statement's transaction alone), then the
-- statement fails with 55P03 and the caller runs it again. A claim's SKIP LOCKED does not
-- skip everything: reaching a row whose newer version another claimer is deleting, it
-- waits for that claimer, which may be waiting to delete a row this one just locked; such a
-- deadlock held both for deadlock_timeout (1 s by default) before one gave way. `heads` is
-- read before any row is locked: the claim reads it first, and the completion comes after
-- the claim's pick (it waits for picked, or follows claimed in the UNION ALL).
-- Kept means moved: the DELETE … RETURNING and the INSERT move exactly the completed rows into
-- backlog_job_done, atomically, out of the table that claims read and compactions copy
-- (migrations/postgres/0015_job_done.sql).
-- @param token: i64
-- @param owner: &str
-- @param expires: i64
-- @param now: i64
-- @param queue: &str
-- @param kinds: Option<Vec<String>>
-- @param limit: i64
-- @param done_ids: &[i64]
-- @param done_tokens: &[i64]
-- @param done_now: i64
WITH gone AS (
    DELETE FROM backlog_job
    WHERE id = ANY($8::bigint[]) AND state = 'running'
      AND lease_token = ($9::bigint[])[array_position($8::bigint[], id)]
    RETURNING *
), done AS (
    INSERT INTO backlog_job_done
        (id, queue, kind, payload, state, priority, run_at, attempt, max_attempts, lease_token,
         lease_owner, lease_expires_at, unique_key, errors, result, progress, created_at,
         attempted_at, finished_at, cancel_requested_at, trace_context, group_key, shard,
         slot)
    SELECT id, queue, kind, payload, 'completed', priority, run_at, attempt, max_attempts, NULL,
           lease_owner, NULL, unique_key, errors, result, progress, created_at,
           attempted_at, $10, cancel_requested_at, trace_context, group_key, shard,
           (SELECT (($10 / period_us) % 16)::smallint FROM backlog_job_done_ring)
    FROM gone
    RETURNING id
), heads AS MATERIALIZED (
    SELECT n, floor(random() * n)::int AS first,
           set_config('lock_timeout', '50ms', true) AS lock_timeout
    FROM (SELECT CASE WHEN bool_or(paused OR global_concurrency IS NOT NULL OR rate_limit IS NOT NULL
                                    OR group_rate_limit IS NOT NULL) THEN 0
                       ELSE COALESCE(max(shards), 1) END AS n
          FROM backlog_queue WHERE name = $5) AS q
), picked AS (
    SELECT c.id
    FROM heads AS q
    CROSS JOIN generate_series(0, 255) AS s(i)
    CROSS JOIN LATERAL (
        SELECT id FROM backlog_job
        WHERE queue = $5 AND shard = (q.first + s.i) % q.n AND state = 'available' AND run_at <= $4
          AND ($6::text[] IS NULL OR kind = ANY($6::text[]))
        ORDER BY priority, run_at DESC, id DESC
        LIMIT $7
        FOR UPDATE SKIP LOCKED
    ) AS c
    WHERE s.i < q.n
    LIMIT $7
),
claimed AS (
    UPDATE backlog_job j
    SET state = 'running', attempt = j.attempt + 1, lease_token = $1, lease_owner = $2,
        lease_expires_at = $3, attempted_at = $4
    WHERE j.id = ANY(ARRAY(SELECT id FROM picked))
    RETURNING
        j.id, j.kind, j.payload::text AS payload, j.priority, j.attempt, j.max_attempts,
        j.run_at, j.created_at, j.trace_context, j.group_key
)
SELECT NULL::bigint[] AS done_ids, c.* FROM claimed AS c
UNION ALL
SELECT d.done_ids, c.* FROM (SELECT array_agg(id) AS done_ids FROM done) AS d
LEFT JOIN claimed AS c ON false
"""
QUERIES["postgres/job_complete_then_claim_delete_fifo.sql"] = """\
-- @generated from templates/postgres/job_complete_claim.sql by tests/templates.rs: edit the template
-- Completes a worker's finished jobs and claims its next ones in one statement and one commit.
-- Returns a row per claimed job (done_ids NULL), then one more row whose done_ids are the
-- completed ids (NULL when none) and whose other columns are NULL. A UNION ALL row costs the
-- database less than joining the ids onto the claimed rows (scripts/pg_claim_costs.py). Both
-- parts see one snapshot and touch disjoint rows (the completed jobs are running under the
-- caller's tokens; the claimed ones available).
-- The completed jobs are deleted.
-- Each ran under its own lease token (`done_tokens`, in the order of `done_ids`).
-- Order: FIFO, by priority, then due time, then id.
-- Shards: taken as job_claim_fifo takes them, from a random shard, each shard's head in turn.
-- Lock waits: 50 ms at most (lock_timeout, for this statement's transaction alone), then the
-- statement fails with 55P03 and the caller runs it again. A claim's SKIP LOCKED does not
-- skip everything: reaching a row whose newer version another claimer is deleting, it
-- waits for that claimer, which may be waiting to delete a row this one just locked; such a
-- deadlock held both for deadlock_timeout (1 s by default) before one gave way. `heads` is
-- read before any row is locked: the claim reads it first, and the completion comes after
-- the claim's pick (it waits for picked, or follows claimed in the UNION ALL).
-- Cursor: each shard's claim starts past `cursor` (three values a shard: priority, run_at,
-- id; src/cursor.rs), past the index entries that claimed and completed jobs leave
-- behind while a held snapshot keeps vacuum from removing them. Empty, or a shard beyond
-- it: from the head (a full pass).
-- @param token: i64
-- @param owner: &str
-- @param expires: i64
-- @param now: i64
-- @param queue: &str
-- @param kinds: Option<Vec<String>>
-- @param limit: i64
-- @param done_ids: &[i64]
-- @param done_tokens: &[i64]
-- @param cursor: &[i64]
WITH done AS (
    DELETE FROM backlog_job
    WHERE id = ANY($8::bigint[]) AND state = 'running'
      AND lease_token = ($9::bigint[])[array_position($8::bigint[], id)]
    RETURNING id
), heads AS MATERIALIZED (
    SELECT n, floor(random() * n)::int AS first,
           set_config('lock_timeout', '50ms', true) AS lock_timeout
    FROM (SELECT CASE WHEN bool_or(paused OR global_concurrency IS NOT NULL OR rate_limit IS NOT NULL
                                    OR group_rate_limit IS NOT NULL) THEN 0
                       ELSE COALESCE(max(shards), 1) END AS n
          FROM backlog_queue WHERE name = $5) AS q
), picked AS (
    SELECT c.id
    FROM heads AS q
    CROSS JOIN generate_series(0, 255) AS s(i)
    CROSS JOIN LATERAL (
        SELECT id FROM backlog_job
        WHERE queue = $5 AND shard = (q.first + s.i) % q.n AND state = 'available' AND run_at <= $4
          AND (priority, run_at, id) > (COALESCE(($10::bigint[])[3 * ((q.first + s.i) % q.n) + 1], -32768)::smallint,
                                        COALESCE(($10::bigint[])[3 * ((q.first + s.i) % q.n) + 2], -9223372036854775807),
                                        COALESCE(($10::bigint[])[3 * ((q.first + s.i) % q.n) + 3], -9223372036854775807))
          AND ($6::text[] IS NULL OR kind = ANY($6::text[]))
        ORDER BY priority, run_at, id
        LIMIT $7
        FOR UPDATE SKIP LOCKED
    ) AS c
    WHERE s.i < q.n
    LIMIT $7
),
claimed AS (
    UPDATE backlog_job j
    SET state = 'running', attempt = j.attempt + 1, lease_token = $1, lease_owner = $2,
        lease_expires_at = $3, attempted_at = $4
    WHERE j.id = ANY(ARRAY(SELECT id FROM picked))
    RETURNING
        j.id, j.kind, j.payload::text AS payload, j.priority, j.attempt, j.max_attempts,
        j.run_at, j.created_at, j.trace_context, j.group_key, j.shard
)
SELECT NULL::bigint[] AS done_ids, c.* FROM claimed AS c
UNION ALL
SELECT d.done_ids, c.* FROM (SELECT array_agg(id) AS done_ids FROM done) AS d
LEFT JOIN claimed AS c ON false
"""
QUERIES["postgres/job_complete_then_claim_delete_lifo.sql"] = """\
-- @generated from templates/postgres/job_complete_claim.sql by tests/templates.rs: edit the template
-- Completes a worker's finished jobs and claims its next ones in one statement and one commit.
-- Returns a row per claimed job (done_ids NULL), then one more row whose done_ids are the
-- completed ids (NULL when none) and whose other columns are NULL. A UNION ALL row costs the
-- database less than joining the ids onto the claimed rows (scripts/pg_claim_costs.py). Both
-- parts see one snapshot and touch disjoint rows (the completed jobs are running under the
-- caller's tokens; the claimed ones available).
-- The completed jobs are deleted.
-- Each ran under its own lease token (`done_tokens`, in the order of `done_ids`).
-- Order: LIFO, by priority, then latest due time first.
-- Shards: taken as job_claim_fifo takes them, from a random shard, each shard's head in turn.
-- Lock waits: 50 ms at most (lock_timeout, for this statement's transaction alone), then the
-- statement fails with 55P03 and the caller runs it again. A claim's SKIP LOCKED does not
-- skip everything: reaching a row whose newer version another claimer is deleting, it
-- waits for that claimer, which may be waiting to delete a row this one just locked; such a
-- deadlock held both for deadlock_timeout (1 s by default) before one gave way. `heads` is
-- read before any row is locked: the claim reads it first, and the completion comes after
-- the claim's pick (it waits for picked, or follows claimed in the UNION ALL).
-- @param token: i64
-- @param owner: &str
-- @param expires: i64
-- @param now: i64
-- @param queue: &str
-- @param kinds: Option<Vec<String>>
-- @param limit: i64
-- @param done_ids: &[i64]
-- @param done_tokens: &[i64]
WITH done AS (
    DELETE FROM backlog_job
    WHERE id = ANY($8::bigint[]) AND state = 'running'
      AND lease_token = ($9::bigint[])[array_position($8::bigint[], id)]
    RETURNING id
), heads AS MATERIALIZED (
    SELECT n, floor(random() * n)::int AS first,
           set_config('lock_timeout', '50ms', true) AS lock_timeout
    FROM (SELECT CASE WHEN bool_or(paused OR global_concurrency IS NOT NULL OR rate_limit IS NOT NULL
                                    OR group_rate_limit IS NOT NULL) THEN 0
                       ELSE COALESCE(max(shards), 1) END AS n
          FROM backlog_queue WHERE name = $5) AS q
), picked AS (
    SELECT c.id
    FROM heads AS q
    CROSS JOIN generate_series(0, 255) AS s(i)
    CROSS JOIN LATERAL (
        SELECT id FROM backlog_job
        WHERE queue = $5 AND shard = (q.first + s.i) % q.n AND state = 'available' AND run_at <= $4
          AND ($6::text[] IS NULL OR kind = ANY($6::text[]))
        ORDER BY priority, run_at DESC, id DESC
        LIMIT $7
        FOR UPDATE SKIP LOCKED
    ) AS c
    WHERE s.i < q.n
    LIMIT $7
),
claimed AS (
    UPDATE backlog_job j
    SET state = 'running', attempt = j.attempt + 1, lease_token = $1, lease_owner = $2,
        lease_expires_at = $3, attempted_at = $4
    WHERE j.id = ANY(ARRAY(SELECT id FROM picked))
    RETURNING
        j.id, j.kind, j.payload::text AS payload, j.priority, j.attempt, j.max_attempts,
        j.run_at, j.created_at, j.trace_context, j.group_key
)
SELECT NULL::bigint[] AS done_ids, c.* FROM claimed AS c
UNION ALL
SELECT d.done_ids, c.* FROM (SELECT array_agg(id) AS done_ids FROM done) AS d
LEFT JOIN claimed AS c ON false
"""
