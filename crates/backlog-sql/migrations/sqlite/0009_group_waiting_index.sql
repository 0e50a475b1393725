-- backlog schema version 9 (SQLite): indexes of the jobs waiting and active in ordered groups.
-- backlog_job_group (version 7) holds every job with a group, finished ones too (SQLite uses a
-- partial index only where the query repeats its condition, and the group queries ask for one
-- state at a time), so finding a group's next job (a promotion, a hand-off) and counting its
-- active jobs walked every row the group still had in the table: with retention `keep`, all its
-- completed jobs. These two hold only what those look-ups ask for. A job enters the first when
-- enqueued waiting and leaves it when its turn comes; it is in the second while available or
-- running (its entry stays put as it is claimed).
CREATE INDEX backlog_job_group_waiting ON backlog_job (queue, group_key, id)
    WHERE state = 'waiting';
CREATE INDEX backlog_job_group_active ON backlog_job (queue, group_key)
    WHERE group_key IS NOT NULL AND state IN ('available', 'running');
