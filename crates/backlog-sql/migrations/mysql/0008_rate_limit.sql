-- backlog schema version 8 (MySQL, MariaDB): rate limits kept in the database, so that they
-- hold across every process. At most rate_limit job starts per rate_period_ms in the queue: a
-- token bucket of rate_limit tokens that refills at rate_limit per period, whose level
-- (rate_tokens) and time (rate_at) claims read and write under the queue row's lock, as they do
-- for the global concurrency limit. A claim takes a token per job; jobs over the limit stay
-- available.
-- DDL commits statement by statement here, so each statement stands alone.
ALTER TABLE backlog_queue ADD COLUMN rate_limit INT NULL;
ALTER TABLE backlog_queue ADD COLUMN rate_period_ms BIGINT NOT NULL DEFAULT 1000;
ALTER TABLE backlog_queue ADD COLUMN rate_tokens DOUBLE NULL;
ALTER TABLE backlog_queue ADD COLUMN rate_at BIGINT NULL;
ALTER TABLE backlog_queue ADD CONSTRAINT backlog_queue_rate CHECK (
    (rate_limit IS NULL OR rate_limit >= 1) AND rate_period_ms >= 1);
