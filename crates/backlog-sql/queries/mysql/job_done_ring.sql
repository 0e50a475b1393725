-- The ring of completed jobs' tables (version 17): how long one is written, when completions
-- last turned to the next, and the table they write now, read off the view that names it (the
-- view is the truth: a turn replaces it, then records the time).
SELECT r.period_us, r.turned_at,
       (SELECT VIEW_DEFINITION FROM information_schema.VIEWS
        WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = 'backlog_job_done_current') AS current
FROM backlog_job_done_ring r
