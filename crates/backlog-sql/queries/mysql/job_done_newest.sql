-- The newest finish time in each table of the ring, 0 to 15 (NULL: no row), each read off the
-- end of its finished_at index.
SELECT
       (SELECT MAX(finished_at) FROM backlog_job_done_0),
       (SELECT MAX(finished_at) FROM backlog_job_done_1),
       (SELECT MAX(finished_at) FROM backlog_job_done_2),
       (SELECT MAX(finished_at) FROM backlog_job_done_3),
       (SELECT MAX(finished_at) FROM backlog_job_done_4),
       (SELECT MAX(finished_at) FROM backlog_job_done_5),
       (SELECT MAX(finished_at) FROM backlog_job_done_6),
       (SELECT MAX(finished_at) FROM backlog_job_done_7),
       (SELECT MAX(finished_at) FROM backlog_job_done_8),
       (SELECT MAX(finished_at) FROM backlog_job_done_9),
       (SELECT MAX(finished_at) FROM backlog_job_done_10),
       (SELECT MAX(finished_at) FROM backlog_job_done_11),
       (SELECT MAX(finished_at) FROM backlog_job_done_12),
       (SELECT MAX(finished_at) FROM backlog_job_done_13),
       (SELECT MAX(finished_at) FROM backlog_job_done_14),
       (SELECT MAX(finished_at) FROM backlog_job_done_15)
