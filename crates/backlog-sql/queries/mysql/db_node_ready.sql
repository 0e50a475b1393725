-- Whether a Galera node takes queries: ON once it is synced with the primary component; OFF
-- while it joins, donates a state transfer or is cut off from the majority.
-- @unprepared
SHOW GLOBAL STATUS LIKE 'wsrep_ready'
