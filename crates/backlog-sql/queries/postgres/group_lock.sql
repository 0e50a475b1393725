-- Takes the lock rows of ordered groups (made on first use), in key order so that two
-- promoters of overlapping groups cannot deadlock. Promotions of one group then run one after
-- the other, each seeing (in its next statement) what the one before committed.
-- @param queue: &str
-- @param groups: Vec<String>
INSERT INTO backlog_group (queue, group_key)
SELECT $1, g FROM unnest($2::text[]) AS t(g) ORDER BY g
ON CONFLICT (queue, group_key) DO UPDATE SET turns = backlog_group.turns + 1
