RETURNING j.id, j.kind, j.payload::text AS payload, j.priority, j.attempt, j.max_attempts,
-- @if order=fifo
          j.run_at, j.created_at, j.trace_context, j.group_key, j.shard
-- @else
          j.run_at, j.created_at, j.trace_context, j.group_key
-- @end
