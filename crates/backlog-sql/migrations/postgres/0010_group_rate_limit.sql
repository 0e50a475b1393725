-- backlog schema version 10 (PostgreSQL): a rate limit per ordered group. At most
-- group_rate_limit job starts per group_rate_period_ms in each group of the queue, kept per
-- group in backlog_group.rate_at: the group's theoretical arrival time under the generic cell
-- rate algorithm (a token bucket of group_rate_limit tokens, told as one time). A group's job
-- is paced as its turn comes (it is promoted), under the group's lock row: when the limit does
-- not let it start yet, it is made available with run_at set to when it does.
ALTER TABLE backlog_queue ADD COLUMN group_rate_limit INTEGER NULL CHECK (group_rate_limit >= 1);
ALTER TABLE backlog_queue ADD COLUMN group_rate_period_ms BIGINT NOT NULL DEFAULT 1000
    CHECK (group_rate_period_ms >= 1);
ALTER TABLE backlog_group ADD COLUMN rate_at BIGINT NULL;
