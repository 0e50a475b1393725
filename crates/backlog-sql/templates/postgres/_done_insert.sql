    INSERT INTO backlog_job_done
        (id, queue, kind, payload, state, priority, run_at, attempt, max_attempts, lease_token,
         lease_owner, lease_expires_at, unique_key, errors, result, progress, created_at,
         attempted_at, finished_at, cancel_requested_at, trace_context, group_key, shard,
         slot)
    SELECT id, queue, kind, payload, 'completed', priority, run_at, attempt, max_attempts, NULL,
           lease_owner, NULL, unique_key, errors, result, progress, created_at,
           attempted_at, ${done_now}, cancel_requested_at, trace_context, group_key, shard,
           (SELECT ((${done_now} / period_us) % 16)::smallint FROM backlog_job_done_ring)
