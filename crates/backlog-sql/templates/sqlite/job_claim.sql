-- @name job_claim_{mode}{order}
-- @axis mode: plain=, json=json_, limited=limited_
-- @axis order: fifo, lifo
-- @if mode=plain
-- @if order=fifo
-- Claims up to `limit` due jobs of a queue under one new lease, FIFO: by priority, then due time,
-- then id.
-- @else
-- Claims up to `limit` due jobs of a queue under one new lease, LIFO: by priority, then latest due
-- time first, then highest id.
-- @end
-- `kinds`: a JSON array, NULL for any kind. One statement: SQLite has a single writer, so
-- the picked rows cannot be taken by anyone else.
-- The claim of the SQL contract, for clients in other languages (clients/python): their driver
-- reads a result's rows where it runs. This library marks the rows and reads them back as one
-- row (job_claim_json_{{order}}), the same jobs.
-- @external
-- @elif mode=json
-- @if order=fifo
-- Claims up to `limit` due jobs of a queue under one new lease, FIFO: by priority, then due time,
-- then id, in two statements
-- @else
-- Claims up to `limit` due jobs of a queue under one new lease, LIFO: by priority, then latest due
-- time first, then highest id, in two statements
-- @end
-- sent as one command: the first marks the rows with the claim's fresh token, the second reads
-- them back as one row, a JSON array with, for each job, [id, kind, payload, priority, attempt,
-- max_attempts, run_at, created_at, trace_context, group_key] (the payload and trace context as
-- strings), in no particular order. `kinds`: a JSON array, NULL for any kind. One command and one
-- row, not a row per job: the SQLite driver runs the connection on a thread of its own, and each
-- command is a round trip to it and each row of a result a hand-over back, which cost more than
-- the claim itself (docs/explain.md, "SQLite: a claim read back in one row"). Every claim of the
-- library on SQLite but those under a queue's limits takes this form, in a write transaction. A
-- client whose driver takes one statement at a time runs the two in turn, in one transaction.
-- All rows of one claim share its expiry, so the read-back finds them by the lease index.
-- @else
-- @if order=fifo
-- Claims up to `limit` due jobs of a queue with a global concurrency limit (FIFO), in the
-- @else
-- Claims up to `limit` due jobs of a queue with a global concurrency limit (LIFO), in the
-- @end
-- transaction that holds the queue row's lock (queue_lock) and has counted its running jobs
-- (queue_running): `limit` is what the limit leaves. Not the paused check of job_claim_{{order}}:
-- queue_lock read it under the lock.
-- @end
-- @include claim_params
-- @include claim_update
-- @if mode=json
);
SELECT json_group_array(json_array(
    -- @include claim_columns
))
FROM backlog_job
WHERE state = 'running' AND lease_expires_at = ${expires} AND lease_token = ${token}
-- @else
)
-- @if mode=plain
-- Not the queue, token or lease expiry: the claimer chose them.
-- @end
RETURNING
    -- @include claim_columns
-- @end
