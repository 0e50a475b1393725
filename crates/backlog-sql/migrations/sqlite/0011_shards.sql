-- backlog schema version 11 (SQLite): a queue's `shards` setting. SQLite runs one write
-- transaction at a time, so concurrent claims never meet at a shared head and a sharded claim
-- point would buy nothing: the setting is kept (and shown) and claims keep the one strict head.
ALTER TABLE backlog_queue ADD COLUMN shards INTEGER NOT NULL DEFAULT 1
    CHECK (shards BETWEEN 1 AND 256);
