-- Drops the counts of the completed jobs' ring tables that hold no job (a JSON array of their
-- numbers): emptied by TRUNCATE, which no trigger sees. Only tables completions no longer
-- write; a drop that did not run after its TRUNCATE (a crash) runs at the next pass.
-- @param slots: &str
DELETE FROM backlog_count
WHERE state = 'completed'
  AND due IN (SELECT j.s FROM JSON_TABLE(?, '$[*]' COLUMNS (s BIGINT PATH '$')) AS j)
