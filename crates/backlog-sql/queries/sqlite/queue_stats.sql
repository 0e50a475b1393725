-- Job counts per queue, state and whether not yet due, of one queue or all (`queue` NULL), from
-- the counts the database keeps (backlog_count, schema version 19): the sums of each key's
-- rows, O(queues × keys) whatever the jobs. A `scheduled` or `retrying` key whose `due` has
-- passed is available; `archived` counts apart (as `completed`, archived 1).
-- future: 0 due (or not available), 1 due later and never failed (attempt 0: scheduled), 2 due later
-- after a failed attempt (retrying).
-- @param now: i64
-- @param queue: Option<&str>
SELECT queue,
       CASE WHEN state IN ('scheduled', 'retrying') THEN 'available'
            WHEN state = 'archived' THEN 'completed' ELSE state END AS k_state,
       CASE WHEN state = 'scheduled' AND due > ?1 THEN 1
            WHEN state = 'retrying' AND due > ?1 THEN 2 ELSE 0 END AS future,
       CASE WHEN state = 'archived' THEN 1 ELSE 0 END AS archived,
       SUM(n) AS n
FROM backlog_count
WHERE (?2 IS NULL OR queue = ?2)
GROUP BY queue, k_state, future, archived
HAVING SUM(n) <> 0
