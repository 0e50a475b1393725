-- @name job_complete_{retention}{tokens}{read}
-- @axis retention: keep, delete, archive
-- @axis tokens: many=, one=_one
-- @axis read: ids=, unread=_unread
-- @skip retention=archive read=unread
-- @if read=unread
-- @if tokens=many
-- job_complete_{{retention}} without reading back the ids: for a completion that checks only
-- @else
-- job_complete_{{retention}}_one without reading back the ids: for a completion that checks only how
-- @end
-- how many rows it changed (reading them back costs CPU on every completion).
-- @elif retention=archive tokens=many
-- Copies running jobs whose lease tokens still match into the archive, completed. `pairs`: the
-- (id, lease_token) pairs as JSON (see job_complete_delete). The DELETE of job_complete_delete
-- follows in the same transaction.
-- @elif retention=archive
-- Copies running jobs of one claim (one lease token) into the archive, completed. `ids`: a JSON
-- array of ids (see job_complete_delete_one). The DELETE of job_complete_delete_one follows in
-- the same transaction.
-- @elif retention=keep tokens=many
-- Completes running jobs whose lease tokens still match: marks them completed, kept, returning
-- their ids. `pairs`: the (id, lease_token) pairs as JSON (see job_complete_delete).
-- @elif retention=keep
-- Completes running jobs of one claim (one lease token): marks them completed, kept, returning
-- their ids. `ids`: a JSON array of ids, checked with one token (see job_complete_delete_one).
-- @elif tokens=many
-- Completes running jobs whose lease tokens still match: deletes them, returning their ids.
-- `pairs`: the (id, lease_token) pairs as a JSON array of two-element arrays. One statement text
-- for any batch size; each pair is looked up by primary key (never a scan of the running jobs).
-- @else
-- Completes running jobs of one claim (one lease token): deletes them, returning their ids.
-- `ids`: a JSON array of ids, checked with one token instead of a token per id: the form for a
-- worker that completes a claim's jobs together.
-- @end
-- @if tokens=many
-- @param pairs: &str
-- @else
-- @param ids: &str
-- @end
-- @if retention!=delete
-- @param now: i64
-- @end
-- @if tokens=one
-- @param token: i64
-- @end
-- @if retention=keep
UPDATE backlog_job
SET state = 'completed', finished_at = ${now}, lease_token = NULL, lease_expires_at = NULL
-- @elif retention=delete
DELETE FROM backlog_job
-- @else
INSERT INTO backlog_job_archive
    (id, queue, kind, payload, state, priority, run_at, attempt, max_attempts, lease_token,
     lease_owner, lease_expires_at, unique_key, errors, result, progress, created_at,
     attempted_at, finished_at, cancel_requested_at, trace_context, group_key)
SELECT id, queue, kind, payload, 'completed', priority, run_at, attempt, max_attempts, NULL,
       lease_owner, NULL, unique_key, errors, result, progress, created_at, attempted_at, ${now},
       cancel_requested_at, trace_context, group_key
FROM backlog_job
-- @end
-- @if tokens=many
WHERE id IN (
    SELECT b.id FROM json_each(${pairs}) AS p
    JOIN backlog_job AS b ON b.id = p.value ->> 0
    WHERE b.lease_token = p.value ->> 1 AND b.state = 'running'
)
-- @else
WHERE id IN (SELECT value FROM json_each(${ids})) AND lease_token = ${token} AND state = 'running'
-- @end
-- @if retention!=archive read=ids
RETURNING id
-- @end
