-- backlog schema version 8 (PostgreSQL): rate limits kept in the database, so that they hold
-- across every process. At most rate_limit job starts per rate_period_ms in the queue: a token
-- bucket of rate_limit tokens that refills at rate_limit per period, whose level (rate_tokens)
-- and time (rate_at) claims read and write under the queue row's lock, as they do for the global
-- concurrency limit. A claim takes a token per job; jobs over the limit stay available.
ALTER TABLE backlog_queue ADD COLUMN rate_limit INTEGER NULL CHECK (rate_limit >= 1);
ALTER TABLE backlog_queue ADD COLUMN rate_period_ms BIGINT NOT NULL DEFAULT 1000
    CHECK (rate_period_ms >= 1);
ALTER TABLE backlog_queue ADD COLUMN rate_tokens DOUBLE PRECISION NULL;
ALTER TABLE backlog_queue ADD COLUMN rate_at BIGINT NULL;
