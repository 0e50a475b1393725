AND (priority, run_at, id) > (COALESCE((${cursor}::bigint[])[3 * ((q.first + s.i) % q.n) + 1], -32768)::smallint,
                              COALESCE((${cursor}::bigint[])[3 * ((q.first + s.i) % q.n) + 2], -9223372036854775807),
                              COALESCE((${cursor}::bigint[])[3 * ((q.first + s.i) % q.n) + 3], -9223372036854775807))
