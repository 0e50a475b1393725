-- backlog schema version 11 (PostgreSQL): a queue's claim point spread over shards. A job's
-- shard is picked at insert, at random below its queue's `shards` (1: every job on shard 0, one
-- strict head, as before). The claim index leads with (queue, shard): a claim starts at a random
-- shard and walks the others in turn when one runs dry, so concurrent claimers of a sharded
-- queue meet at different heads instead of skipping over each other's locked rows at one.
ALTER TABLE backlog_queue ADD COLUMN shards INTEGER NOT NULL DEFAULT 1
    CHECK (shards BETWEEN 1 AND 256);
ALTER TABLE backlog_job ADD COLUMN shard SMALLINT NOT NULL DEFAULT 0;
DROP INDEX backlog_job_claim;
CREATE INDEX backlog_job_claim ON backlog_job (queue, shard, priority, run_at, id)
    WHERE state = 'available';
