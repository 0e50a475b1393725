-- Every periodic schedule that ever fired or was declared, by name.
SELECT name, last_tick, schedule, queue, kind, next_tick, declared_at
FROM backlog_cron ORDER BY name
