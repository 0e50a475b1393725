DELETE FROM backlog_subscription WHERE topic = $1 AND queue = $2
