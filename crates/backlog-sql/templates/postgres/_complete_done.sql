    DELETE FROM backlog_job
    WHERE id = ANY(${done_ids}::bigint[]) AND state = 'running'
-- @if tokens=one
      AND lease_token = ${done_token}::bigint
-- @else
      AND lease_token = (${done_tokens}::bigint[])[array_position(${done_ids}::bigint[], id)]
-- @end
-- @if form=with
      AND EXISTS (SELECT 1 FROM picked)
-- @end
-- @if retention=keep
    RETURNING *
), done AS (
-- @include done_insert
    FROM gone
-- @end
    RETURNING id
