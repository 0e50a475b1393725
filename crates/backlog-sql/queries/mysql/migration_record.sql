-- Records a migration as applied (MySQL commits each DDL statement by itself: no transaction).
-- @param version: i64
-- @param name: &str
-- @param applied_at: i64
INSERT INTO backlog_migration (version, name, applied_at) VALUES (?, ?, ?)
