DELETE FROM backlog_subscription WHERE topic = ? AND queue = ?
