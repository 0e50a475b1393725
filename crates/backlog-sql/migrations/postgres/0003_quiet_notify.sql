-- Wake-ups without a NOTIFY per producer commit. A transaction that NOTIFYs takes one
-- database-wide lock at commit, so sixteen producers each notifying serialize their commits on it
-- and single enqueues run at half the database's own rate. Connections that backlog opens set
-- `backlog.notify = off`: the trigger stays quiet for them, and backlog sends the wake-ups itself,
-- after the commit, from one task per process that folds whatever was enqueued meanwhile into one
-- statement. Rows inserted by plain SQL (any other connection) still wake workers through the
-- trigger.
CREATE OR REPLACE FUNCTION backlog_notify() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF current_setting('backlog.notify', true) = 'off' THEN
        RETURN NULL;
    END IF;
    PERFORM pg_notify('backlog_job', q)
    FROM (SELECT DISTINCT queue AS q FROM new_rows WHERE state = 'available') s;
    RETURN NULL;
END
$$;
