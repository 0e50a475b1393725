-- backlog schema version 12 (MySQL, MariaDB): a queue's claim point spread over its `shards`,
-- as PostgreSQL's since version 11. A job's shard is picked at insert, at random below its
-- queue's `shards` (1: every job on shard 0, one strict head, as before); plain SQL inserts
-- take 0. The claim index gains the shard after the state, so that a claim reads one shard's
-- head in claim order (an equality on queue, state and shard) and concurrent claimers of a
-- sharded queue start at different heads instead of scanning past each other's locked and
-- delete-marked entries at one. One statement: DDL commits statement by statement here.
ALTER TABLE backlog_job
    ADD COLUMN shard SMALLINT NOT NULL DEFAULT 0,
    DROP INDEX backlog_job_claim,
    ADD INDEX backlog_job_claim (queue, state, shard, priority, run_at, id);
