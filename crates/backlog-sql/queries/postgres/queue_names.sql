-- Every queue with settings stored, for stats of all queues.
SELECT name FROM backlog_queue
