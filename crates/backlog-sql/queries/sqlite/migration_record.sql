-- Records a migration as applied, in its transaction.
-- @param version: i64
-- @param name: &str
-- @param applied_at: i64
INSERT INTO backlog_migration (version, name, applied_at) VALUES (?1, ?2, ?3)
