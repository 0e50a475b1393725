-- @if mode=limited
    FROM (SELECT COALESCE(max(shards), 1) AS n
-- @else
    FROM (SELECT CASE WHEN bool_or(paused OR global_concurrency IS NOT NULL OR rate_limit IS NOT NULL
                                    OR group_rate_limit IS NOT NULL) THEN 0
                       ELSE COALESCE(max(shards), 1) END AS n
-- @end
          FROM backlog_queue WHERE name = ${queue}) AS q
), picked AS (
    SELECT c.id
    FROM heads AS q
    CROSS JOIN generate_series(0, 255) AS s(i)
    CROSS JOIN LATERAL (
        SELECT id FROM backlog_job
        WHERE queue = ${queue} AND shard = (q.first + s.i) % q.n AND state = 'available' AND run_at <= ${now}
-- @if order=fifo mode!=token
          -- @include cursor
-- @end
          AND (${kinds}::text[] IS NULL OR kind = ANY(${kinds}::text[]))
        -- @include order
        LIMIT ${limit}
-- @if mode!=token
        FOR UPDATE SKIP LOCKED
-- @end
    ) AS c
    WHERE s.i < q.n
    LIMIT ${limit}
