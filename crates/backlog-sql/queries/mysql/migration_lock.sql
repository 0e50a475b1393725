-- A named lock, per database, serialises migrators across processes (waiting up to 60 s; 1 when
-- taken). Lock names are capped at 64 characters; two databases sharing a long prefix merely take
-- turns. migration_unlock releases it.
SELECT GET_LOCK(CONCAT('backlog_migrate:', LEFT(DATABASE(), 48)), 60)
