-- backlog schema version 9 (MySQL, MariaDB): nothing changes. PostgreSQL and SQLite gain a
-- partial index of the jobs waiting in ordered groups at this version; MySQL and MariaDB have no
-- partial indexes, and an index with the state in its key would be rewritten by every claim and
-- completion of every job, grouped or not. Versions stay the same on every dialect.
DO 0;
