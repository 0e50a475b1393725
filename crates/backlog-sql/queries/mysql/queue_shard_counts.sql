-- Every queue with settings stored and its `shards`, for job_reshard.
SELECT name, shards FROM backlog_queue
