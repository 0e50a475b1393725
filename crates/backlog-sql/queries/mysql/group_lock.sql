-- Takes the lock rows of ordered groups (made on first use), in the order given (sorted by the
-- caller) so that two promoters of overlapping groups cannot deadlock. Promotions of one group
-- then run one after the other, each seeing what the one before committed. `turns` changes so
-- that the statement writes the row: on a Galera cluster, where a row lock holds on one node
-- only, two nodes promoting in one group then conflict at certification.
-- @rows ROWS groups: (&str, &str)
INSERT INTO backlog_group (queue, group_key) VALUES /*ROWS*/
ON DUPLICATE KEY UPDATE turns = turns + 1
