-- backlog schema version 11 (MySQL, MariaDB): a queue's `shards` setting.
-- DDL commits statement by statement here, so each statement stands alone.
ALTER TABLE backlog_queue ADD COLUMN shards INTEGER NOT NULL DEFAULT 1;
ALTER TABLE backlog_queue ADD CONSTRAINT backlog_queue_shards CHECK (shards BETWEEN 1 AND 256);
