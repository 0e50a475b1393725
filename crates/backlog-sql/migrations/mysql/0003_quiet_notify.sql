-- Version 3 changes only PostgreSQL's wake-up trigger (connections backlog opens keep it quiet
-- and backlog sends the wake-ups itself). Recorded here too so that a version number means the
-- same contract in every dialect.
SELECT 1;
