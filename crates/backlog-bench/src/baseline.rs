//! The database's own ceiling: the same work as bare SQL, in the fewest statements possible, on
//! the same pool. On PostgreSQL and MySQL the rows go into a scratch copy of `backlog_job` (`CREATE
//! TABLE … LIKE`: the same columns, defaults and indexes, but none of backlog's triggers, so the
//! wake-up NOTIFY is counted against backlog, not the baseline); on SQLite, which has no trigger,
//! into `backlog_job` itself.

use backlog::sqlx::{self, MySqlPool, PgPool, SqlitePool};
use backlog::{Client, SqlBackend};

use crate::args::HoldKind;

/// A bare-SQL runner over the client's own pool.
#[derive(Clone)]
pub struct Baseline {
    pool: Pool,
    /// The table written: a scratch copy, or `backlog_job` on SQLite.
    table: String,
    /// Shards the rows are spread over and claimed from (PostgreSQL; 1: one head).
    shards: i32,
}

#[derive(Clone)]
enum Pool {
    Sqlite(SqlitePool),
    Postgres(PgPool),
    MySql(MySqlPool),
}

type Res<T> = Result<T, sqlx::Error>;

/// The lease the bare claims set: 30 s.
const LEASE_US: i64 = 30_000_000;

/// A claimed job as bare SQL reads it: what any worker needs to run it (its id, kind and payload
/// as text), and no more.
pub type BareJob = (i64, Option<String>, String);

/// A bare drain's form.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum BareForm {
    /// Each batch deleted, fenced by its lease token, by the statement (or transaction) that
    /// claims the next under a lease.
    Statement,
    /// A batch locked and deleted in one transaction (transaction claim mode's shape).
    Transaction,
}

impl std::fmt::Display for BareForm {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            BareForm::Statement => "statement",
            BareForm::Transaction => "transaction",
        })
    }
}

/// The hot table's size.
#[derive(Debug, Clone, Copy, serde::Serialize)]
pub struct Sizes {
    /// Rows, of every queue.
    pub rows: i64,
    /// Bytes of the table (on PostgreSQL with its TOAST; on MySQL InnoDB's clustered index).
    pub table_bytes: i64,
    /// Bytes of its indexes.
    pub index_bytes: i64,
    /// Bytes of the completed jobs kept apart (PostgreSQL's `backlog_job_done`, every partition
    /// with its indexes; 0 elsewhere): what retention keeps, which grows with the window, not with what a
    /// held snapshot keeps.
    pub kept_bytes: i64,
}

impl Baseline {
    /// Sets up the baseline's table; `prefix` is the benchmark's own (letters, digits, `_`).
    pub async fn create(client: &Client, prefix: &str, shards: u16) -> anyhow::Result<Baseline> {
        let table = format!("{prefix}bare");
        let shards = i32::from(shards);
        let b = match client.sql() {
            Some(SqlBackend::Sqlite(b)) => Baseline {
                pool: Pool::Sqlite(b.pool().clone()),
                table: "backlog_job".into(),
                shards,
            },
            Some(SqlBackend::Postgres(b)) => {
                // Behind a transaction pooler the bare SQL goes straight to the server (the
                // listen URL): the ratios are then the pooler's cost and backlog's together.
                let pool = match (b.transaction_pooler(), b.direct_options()) {
                    (false, _) => b.pool().clone(),
                    (true, Some(direct)) => {
                        sqlx::postgres::PgPoolOptions::new()
                            .max_connections(b.pool().options().get_max_connections())
                            .connect_with(direct)
                            .await?
                    }
                    (true, None) => anyhow::bail!(
                        "the benchmark through a transaction pooler needs listen_url= on the URL \
                         (a direct URL, where the bare SQL runs)"
                    ),
                };
                let sql = format!("CREATE TABLE {table} (LIKE backlog_job INCLUDING ALL)");
                sqlx::query(sqlx::AssertSqlSafe(sql)).execute(&pool).await?;
                Baseline {
                    pool: Pool::Postgres(pool),
                    table,
                    shards,
                }
            }
            Some(SqlBackend::MySql(b)) => {
                let sql = format!("CREATE TABLE {table} LIKE backlog_job");
                sqlx::query(sqlx::AssertSqlSafe(sql))
                    .execute(b.pool())
                    .await?;
                Baseline {
                    pool: Pool::MySql(b.pool().clone()),
                    table,
                    shards,
                }
            }
            None => anyhow::bail!("the benchmark needs one of the built-in backends"),
        };
        Ok(b)
    }

    /// One single-row INSERT.
    pub async fn insert_one(&self, queue: &str, payload: &str) -> Res<()> {
        match &self.pool {
            Pool::Sqlite(p) => {
                sqlx::query(sqlx::AssertSqlSafe(format!(
                    "INSERT INTO {t} (queue, payload) VALUES (?, ?)",
                    t = self.table
                )))
                .bind(queue)
                .bind(payload)
                .execute(p)
                .await?;
            }
            Pool::Postgres(p) => {
                sqlx::query(sqlx::AssertSqlSafe(format!(
                    "INSERT INTO {t} (queue, payload, shard) VALUES ($1, $2::jsonb, $3)",
                    t = self.table
                )))
                .bind(queue)
                .bind(payload)
                .bind(self.random_shard() as i16)
                .execute(p)
                .await?;
            }
            Pool::MySql(p) => {
                sqlx::query(sqlx::AssertSqlSafe(format!(
                    "INSERT INTO {t} (queue, payload, shard) VALUES (?, ?, ?)",
                    t = self.table
                )))
                .bind(queue)
                .bind(payload)
                .bind(self.random_shard())
                .execute(p)
                .await?;
            }
        }
        Ok(())
    }

    /// One multi-row INSERT of `payloads` into `queue`.
    pub async fn insert_many(&self, queue: &str, payloads: &[String]) -> Res<()> {
        match &self.pool {
            Pool::Sqlite(p) => {
                let mut qb = sqlx::QueryBuilder::<sqlx::Sqlite>::new(format!(
                    "INSERT INTO {} (queue, payload) ",
                    self.table
                ));
                qb.push_values(payloads, |mut b, pl| {
                    b.push_bind(queue).push_bind(pl);
                });
                qb.build().execute(p).await?;
            }
            Pool::Postgres(p) => {
                sqlx::query(sqlx::AssertSqlSafe(format!(
                    "INSERT INTO {t} (queue, payload, shard) \
                     SELECT $1, p::jsonb, floor(random() * $3) FROM UNNEST($2::text[]) AS t(p)",
                    t = self.table
                )))
                .bind(queue)
                .bind(payloads)
                .bind(self.shards)
                .execute(p)
                .await?;
            }
            Pool::MySql(p) => {
                let mut qb = sqlx::QueryBuilder::<sqlx::MySql>::new(format!(
                    "INSERT INTO {} (queue, payload, shard) ",
                    self.table
                ));
                qb.push_values(payloads, |mut b, pl| {
                    b.push_bind(queue)
                        .push_bind(pl)
                        .push_bind(self.random_shard());
                });
                qb.build().execute(p).await?;
            }
        }
        Ok(())
    }

    /// Claims up to `limit` due jobs of `queue` and then deletes them (a no-op job completed
    /// with retention `delete`): one claim and one completion statement per batch (MySQL, without
    /// `UPDATE … RETURNING`, needs a locking read and an update in one transaction). Returns the
    /// jobs it took.
    pub async fn claim_complete(
        &self,
        queue: &str,
        limit: i64,
        now: i64,
        token: i64,
    ) -> Res<Vec<BareJob>> {
        let expires = now + LEASE_US;
        match &self.pool {
            Pool::Sqlite(p) => {
                let mut tx = p.begin_with("BEGIN IMMEDIATE").await?;
                let jobs = self
                    .sqlite_claim(&mut tx, queue, limit, now, token, None)
                    .await?;
                tx.commit().await?;
                if !jobs.is_empty() {
                    self.sqlite_delete(p, &ids_of(&jobs), token).await?;
                }
                Ok(jobs)
            }
            Pool::Postgres(p) => {
                // The locking pick is a CTE, which PostgreSQL runs once. As a subquery in FROM
                // the planner may put it on the inner side of a nested loop and run it again
                // for every row of the outer scan: with statistics taken while the table was
                // empty, that is a sort of the queue per row of a million-row table. The update
                // finds its rows by the picked ids (`= ANY(ARRAY(…))`), not by a join the
                // planner could drive from a scan of the whole table (docs/explain.md).
                let jobs: Vec<BareJob> = sqlx::query_as(sqlx::AssertSqlSafe(format!(
                    "WITH {picked} \
                     UPDATE {t} j SET state = 'running', attempt = j.attempt + 1, \
                     lease_token = $1, lease_expires_at = $2, attempted_at = $3 \
                     WHERE j.id = ANY(ARRAY(SELECT id FROM picked)) RETURNING j.id, j.kind, j.payload::text",
                    picked = self.pg_picked(),
                    t = self.table
                )))
                .bind(token)
                .bind(expires)
                .bind(now)
                .bind(queue)
                .bind(limit)
                .bind(self.shards)
                .bind(self.random_shard())
                .fetch_all(p)
                .await?;
                if !jobs.is_empty() {
                    let delete = || {
                        sqlx::query(sqlx::AssertSqlSafe(format!(
                            "DELETE FROM {t} WHERE id = ANY($1) AND lease_token = $2",
                            t = self.table
                        )))
                        .bind(ids_of(&jobs))
                        .bind(token)
                        .execute(p)
                    };
                    retry_deadlocks(delete).await?;
                }
                Ok(jobs)
            }
            Pool::MySql(p) => {
                let mut tx = p.begin().await?;
                let jobs = self.mysql_claim(&mut tx, queue, limit, now, token).await?;
                tx.commit().await?;
                if !jobs.is_empty() {
                    self.mysql_delete(p, &ids_of(&jobs), token).await?;
                }
                Ok(jobs)
            }
        }
    }

    /// Deletes `prev` (the jobs of the previous batch, claimed with `prev_token`) and claims up to
    /// `limit` due jobs in one statement (PostgreSQL) or one transaction (SQLite, MySQL): the
    /// hand-written form of what backlog's runtime does. Returns the jobs claimed.
    pub async fn complete_claim_folded(
        &self,
        queue: &str,
        limit: i64,
        now: i64,
        token: i64,
        prev: &[i64],
        prev_token: i64,
    ) -> Res<Vec<BareJob>> {
        let expires = now + LEASE_US;
        let t = &self.table;
        match &self.pool {
            Pool::Sqlite(p) => {
                let mut tx = p.begin_with("BEGIN IMMEDIATE").await?;
                let done = (!prev.is_empty()).then_some((prev, prev_token));
                let jobs = self
                    .sqlite_claim(&mut tx, queue, limit, now, token, done)
                    .await?;
                tx.commit().await?;
                Ok(jobs)
            }
            Pool::Postgres(p) => {
                sqlx::query_as(sqlx::AssertSqlSafe(format!(
                    "WITH done AS (DELETE FROM {t} WHERE id = ANY($8) AND lease_token = $9), \
                     {picked} \
                     UPDATE {t} j SET state = 'running', attempt = j.attempt + 1, \
                     lease_token = $1, lease_expires_at = $2, attempted_at = $3 \
                     WHERE j.id = ANY(ARRAY(SELECT id FROM picked)) RETURNING j.id, j.kind, j.payload::text",
                    picked = self.pg_picked(),
                )))
                .bind(token)
                .bind(expires)
                .bind(now)
                .bind(queue)
                .bind(limit)
                .bind(self.shards)
                .bind(self.random_shard())
                .bind(prev)
                .bind(prev_token)
                .fetch_all(p)
                .await
            }
            Pool::MySql(p) => {
                let mut tx = p.begin().await?;
                if !prev.is_empty() {
                    self.mysql_delete(&mut *tx, prev, prev_token).await?;
                }
                let jobs = self.mysql_claim(&mut tx, queue, limit, now, token).await?;
                tx.commit().await?;
                Ok(jobs)
            }
        }
    }

    /// A shard at random (PostgreSQL's and MySQL's rows and claims).
    fn random_shard(&self) -> i32 {
        rand::random_range(0..self.shards)
    }

    /// PostgreSQL: the CTE `picked` that locks up to $5 due jobs of queue $4 at $3, the shape of
    /// backlog's own claim: with one shard the head of shard 0; with $6 shards each shard's head
    /// in turn from shard $7, one index probe each (the LATERAL subquery), until it has $5. The
    /// locking pick is a CTE, which PostgreSQL runs once: as a subquery in FROM the planner may
    /// put it on the inner side of a nested loop and run it again for every row of the outer
    /// scan (with statistics taken while the table was empty, a sort of the queue per row of a
    /// million-row table).
    fn pg_picked(&self) -> String {
        self.pg_picked_cols("id")
    }

    /// [`Baseline::pg_picked`] returning `cols` of each locked row.
    fn pg_picked_cols(&self, cols: &str) -> String {
        let t = &self.table;
        let head = "queue = $4 AND state = 'available' AND run_at <= $3 \
                    ORDER BY priority, run_at, id LIMIT $5 FOR UPDATE SKIP LOCKED";
        // Lock waits bounded as backlog's own folded statement bounds them (its
        // job_complete_with_claim_*.sql says why), read before the pick locks anything.
        let lt = "lt AS MATERIALIZED (SELECT set_config('lock_timeout', '50ms', true) AS v)";
        if self.shards == 1 {
            // $6 and $7 are bound all the same: one statement text per form.
            format!(
                "{lt}, picked AS (SELECT {cols} FROM {t} WHERE shard = 0 AND $6::int = 1 AND $7::int >= 0 \
                 AND (SELECT v FROM lt) IS NOT NULL AND {head})"
            )
        } else {
            format!(
                "{lt}, picked AS (SELECT c.* FROM generate_series(0, 255) AS s(i) \
                 CROSS JOIN LATERAL (SELECT {cols} FROM {t} WHERE shard = ($7::int + s.i) % $6::int \
                 AND {head}) AS c WHERE s.i < $6::int AND (SELECT v FROM lt) IS NOT NULL LIMIT $5)"
            )
        }
    }

    /// The bare drain forms this database has: the transaction form where a claim can hold row
    /// locks (not SQLite, whose one writer claims and deletes in one transaction already).
    pub fn forms(&self) -> Vec<BareForm> {
        match self.pool {
            Pool::Sqlite(_) => vec![BareForm::Statement],
            _ => vec![BareForm::Statement, BareForm::Transaction],
        }
    }

    /// Locks up to `limit` due jobs of `queue` and deletes them in one transaction, writing
    /// nothing else: transaction claim mode's shape, as the runtime takes it for jobs that end
    /// in their first poll (PostgreSQL, MySQL; `None` on SQLite, whose one-writer claim and
    /// delete are already one transaction). Returns the jobs.
    pub async fn claim_delete_tx(
        &self,
        queue: &str,
        limit: i64,
        now: i64,
    ) -> Res<Option<Vec<BareJob>>> {
        let t = &self.table;
        match &self.pool {
            Pool::Sqlite(_) => Ok(None),
            Pool::Postgres(p) => {
                let mut tx = p.begin().await?;
                let jobs: Vec<BareJob> = sqlx::query_as(sqlx::AssertSqlSafe(format!(
                    "WITH {picked} SELECT id, kind, payload FROM picked",
                    picked = self.pg_picked_cols("id, kind, payload::text AS payload"),
                )))
                .bind(0_i64)
                .bind(0_i64)
                .bind(now)
                .bind(queue)
                .bind(limit)
                .bind(self.shards)
                .bind(self.random_shard())
                .fetch_all(&mut *tx)
                .await?;
                let ids = ids_of(&jobs);
                sqlx::query(sqlx::AssertSqlSafe(format!(
                    "DELETE FROM {t} WHERE id = ANY($1)"
                )))
                .bind(&ids)
                .execute(&mut *tx)
                .await?;
                tx.commit().await?;
                Ok(Some(jobs))
            }
            Pool::MySql(p) => {
                let mut tx = p.begin().await?;
                let jobs = self.mysql_lock(&mut tx, queue, limit, now).await?;
                if !jobs.is_empty() {
                    sqlx::raw_sql(sqlx::AssertSqlSafe(format!(
                        "DELETE FROM {t} WHERE id IN ({list})",
                        list = id_list(&ids_of(&jobs))
                    )))
                    .execute(&mut *tx)
                    .await?;
                }
                tx.commit().await?;
                Ok(Some(jobs))
            }
        }
    }

    /// SQLite: claims up to `limit` due jobs of `queue`, in the caller's transaction, and
    /// deletes `done` (ids claimed with one token) in the same command.
    async fn sqlite_claim(
        &self,
        conn: &mut sqlx::SqliteConnection,
        queue: &str,
        limit: i64,
        now: i64,
        token: i64,
        done: Option<(&[i64], i64)>,
    ) -> Res<Vec<BareJob>> {
        // One command (statements marking, deleting, reading back) and one row back: the
        // driver runs the connection on a thread of its own, and each command and each row
        // of a result is a hand-over between the threads (docs/explain.md, "SQLite: a claim
        // read back in one row").
        let expires = now + LEASE_US;
        let t = &self.table;
        let delete = match done {
            Some(_) => format!(
                "DELETE FROM {t} WHERE id IN (SELECT value FROM json_each(?6)) \
                 AND lease_token = ?7; "
            ),
            None => String::new(),
        };
        let (ids, done_token) = done.unwrap_or((&[], 0));
        let text: String = sqlx::query_scalar(sqlx::AssertSqlSafe(format!(
            "UPDATE {t} SET state = 'running', attempt = attempt + 1, \
             lease_token = ?1, lease_expires_at = ?2, attempted_at = ?3 \
             WHERE id IN (SELECT id FROM {t} WHERE queue = ?4 AND state = 'available' \
             AND run_at <= ?3 ORDER BY priority, run_at, id LIMIT +?5); {delete}\
             SELECT json_group_array(json_array(id, kind, payload)) FROM {t} \
             WHERE state = 'running' AND lease_expires_at = ?2 AND lease_token = ?1"
        )))
        .bind(token)
        .bind(expires)
        .bind(now)
        .bind(queue)
        .bind(limit)
        .bind(serde_json::to_string(ids).expect("ids"))
        .bind(done_token)
        .fetch_one(&mut *conn)
        .await?;
        let mut jobs: Vec<BareJob> =
            serde_json::from_str(&text).map_err(|e| sqlx::Error::Decode(Box::new(e)))?;
        jobs.sort_unstable_by_key(|j| j.0);
        Ok(jobs)
    }

    /// SQLite: deletes the jobs `ids` claimed with `token`.
    async fn sqlite_delete<'c>(
        &self,
        ex: impl sqlx::Executor<'c, Database = sqlx::Sqlite>,
        ids: &[i64],
        token: i64,
    ) -> Res<()> {
        sqlx::query(sqlx::AssertSqlSafe(format!(
            "DELETE FROM {t} WHERE id IN (SELECT value FROM json_each(?1)) AND lease_token = ?2",
            t = self.table
        )))
        .bind(serde_json::to_string(ids).expect("ids"))
        .bind(token)
        .execute(ex)
        .await?;
        Ok(())
    }

    /// MySQL: claims up to `limit` due jobs of `queue` in the transaction `tx`, by a locking read
    /// (no `UPDATE … RETURNING`) and an update of the rows read.
    async fn mysql_claim(
        &self,
        tx: &mut sqlx::MySqlConnection,
        queue: &str,
        limit: i64,
        now: i64,
        token: i64,
    ) -> Res<Vec<BareJob>> {
        let t = &self.table;
        let jobs = self.mysql_lock(tx, queue, limit, now).await?;
        if !jobs.is_empty() {
            // Every value is an integer, written into the text: the statement goes over the
            // text protocol, one round trip, with no prepared statement to cache.
            let (list, expires) = (id_list(&ids_of(&jobs)), now + LEASE_US);
            sqlx::raw_sql(sqlx::AssertSqlSafe(format!(
                "UPDATE {t} SET state = 'running', attempt = attempt + 1, \
                 lease_token = {token}, lease_expires_at = {expires}, attempted_at = {now} \
                 WHERE id IN ({list})"
            )))
            .execute(&mut *tx)
            .await?;
        }
        Ok(jobs)
    }

    /// MySQL: locks up to `limit` due jobs of `queue` in the transaction `tx` (a locking read,
    /// SKIP LOCKED), as backlog's own claim does, and returns them.
    async fn mysql_lock(
        &self,
        tx: &mut sqlx::MySqlConnection,
        queue: &str,
        limit: i64,
        now: i64,
    ) -> Res<Vec<BareJob>> {
        let t = &self.table;
        // backlog's own claim: each shard's head in turn from a random one, one statement each.
        let mut jobs: Vec<BareJob> = vec![];
        let first = self.random_shard();
        for k in 0..self.shards {
            let got: Vec<BareJob> = sqlx::query_as(sqlx::AssertSqlSafe(format!(
                "SELECT id, kind, CAST(payload AS CHAR) FROM {t} FORCE INDEX (backlog_job_shard_claim) \
                 WHERE queue = ? AND state = 'available' AND shard = ? AND run_at <= ? \
                 ORDER BY priority, run_at, id LIMIT ? FOR UPDATE SKIP LOCKED"
            )))
            .bind(queue)
            .bind((first + k) % self.shards)
            .bind(now)
            .bind(limit - jobs.len() as i64)
            .fetch_all(&mut *tx)
            .await?;
            jobs.extend(got);
            if jobs.len() as i64 >= limit {
                break;
            }
        }
        Ok(jobs)
    }

    /// MySQL: deletes the jobs `ids` claimed with `token` (integers written into the text).
    async fn mysql_delete<'c>(
        &self,
        ex: impl sqlx::Executor<'c, Database = sqlx::MySql>,
        ids: &[i64],
        token: i64,
    ) -> Res<()> {
        sqlx::raw_sql(sqlx::AssertSqlSafe(format!(
            "DELETE FROM {t} WHERE id IN ({list}) AND lease_token = {token}",
            t = self.table,
            list = id_list(ids)
        )))
        .execute(ex)
        .await?;
        Ok(())
    }

    /// For each completed job of `queue`: microseconds from its claim to its completion, as the
    /// database recorded them (`finished_at - attempted_at`).
    pub async fn claim_to_completion(&self, queue: &str) -> Res<Vec<i64>> {
        let sql = |ph: &str| {
            sqlx::AssertSqlSafe(format!(
                "SELECT finished_at - attempted_at FROM backlog_job \
                 WHERE queue = {ph} AND state = 'completed'"
            ))
        };
        match &self.pool {
            Pool::Sqlite(p) => sqlx::query_scalar(sql("?")).bind(queue).fetch_all(p).await,
            // Completed jobs kept apart (schema version 15) are in backlog_job_done.
            Pool::Postgres(p) => {
                sqlx::query_scalar(
                    "SELECT finished_at - attempted_at FROM backlog_job \
                     WHERE queue = $1 AND state = 'completed' \
                     UNION ALL SELECT finished_at - attempted_at FROM backlog_job_done \
                     WHERE queue = $1",
                )
                .bind(queue)
                .fetch_all(p)
                .await
            }
            // And in the ring of tables since version 17.
            Pool::MySql(p) => {
                sqlx::query_scalar(
                    "SELECT finished_at - attempted_at FROM backlog_job \
                     WHERE queue = ? AND state = 'completed' \
                     UNION ALL SELECT finished_at - attempted_at FROM backlog_job_done \
                     WHERE queue = ?",
                )
                .bind(queue)
                .bind(queue)
                .fetch_all(p)
                .await
            }
        }
    }

    /// The hot table's rows and its bytes on disk, of the table itself and of its indexes.
    pub async fn sizes(&self) -> Res<Sizes> {
        let (rows, table, index): (i64, i64, i64) = match &self.pool {
            Pool::Postgres(p) => {
                let (rows, table, index, kept) = sqlx::query_as(
                    "SELECT (SELECT count(*) FROM backlog_job), pg_table_size('backlog_job'), \
                     pg_indexes_size('backlog_job'), \
                     (SELECT COALESCE(SUM(pg_total_relation_size(relid)), 0)::bigint \
                      FROM pg_partition_tree(to_regclass('backlog_job_done')))",
                )
                .fetch_one(p)
                .await?;
                return Ok(Sizes {
                    rows,
                    table_bytes: table,
                    index_bytes: index,
                    kept_bytes: kept,
                });
            }
            Pool::MySql(p) => {
                // information_schema's sizes are statistics: refresh them first.
                sqlx::query("ANALYZE TABLE backlog_job").execute(p).await?;
                let (rows, table, index) = sqlx::query_as(
                    "SELECT (SELECT count(*) FROM backlog_job), CAST(data_length AS SIGNED), \
                     CAST(index_length AS SIGNED) FROM information_schema.TABLES \
                     WHERE table_schema = DATABASE() AND table_name = 'backlog_job'",
                )
                .fetch_one(p)
                .await?;
                // The ring of completed jobs' tables (schema version 17): their files' bytes
                // (MariaDB's view of the tablespaces; 0 where the server has none).
                let kept: i64 = sqlx::query_scalar(
                    "SELECT CAST(COALESCE(SUM(FILE_SIZE), 0) AS SIGNED) \
                     FROM information_schema.INNODB_SYS_TABLESPACES \
                     WHERE NAME LIKE CONCAT(DATABASE(), '/backlog\\_job\\_done\\_%')",
                )
                .fetch_one(p)
                .await
                .unwrap_or(0);
                return Ok(Sizes {
                    rows,
                    table_bytes: table,
                    index_bytes: index,
                    kept_bytes: kept,
                });
            }
            Pool::Sqlite(p) => {
                // dbstat: the pages of each b-tree (the table, and each of its indexes).
                sqlx::query_as(
                    "SELECT (SELECT count(*) FROM backlog_job), \
                     COALESCE((SELECT sum(pgsize) FROM dbstat WHERE name = 'backlog_job'), 0), \
                     COALESCE((SELECT sum(pgsize) FROM dbstat WHERE name IN \
                       (SELECT name FROM sqlite_master WHERE type = 'index' \
                        AND tbl_name = 'backlog_job')), 0)",
                )
                .fetch_one(p)
                .await?
            }
        };
        Ok(Sizes {
            rows,
            table_bytes: table,
            index_bytes: index,
            kept_bytes: 0,
        })
    }

    /// Deletes the jobs of the benchmark's queues whose names start with `prefix`, on both
    /// sides, and their queue rows.
    pub async fn clean(&self, prefix: &str) -> Res<()> {
        let like = format!("{prefix}%");
        let t = &self.table;
        let (job, bare, queue) = match self.pool {
            Pool::Postgres(_) => (
                "backlog_job WHERE queue LIKE $1",
                format!("{t} WHERE queue LIKE $1"),
                "backlog_queue WHERE name LIKE $1",
            ),
            _ => (
                "backlog_job WHERE queue LIKE ?",
                format!("{t} WHERE queue LIKE ?"),
                "backlog_queue WHERE name LIKE ?",
            ),
        };
        let mut tables = vec![job.to_owned(), bare, queue.to_owned()];
        match self.pool {
            Pool::Postgres(_) => tables.push("backlog_job_done WHERE queue LIKE $1".to_owned()),
            // The ring of completed jobs' tables (schema version 17).
            Pool::MySql(_) => {
                tables.extend((0..16).map(|k| format!("backlog_job_done_{k} WHERE queue LIKE ?")))
            }
            Pool::Sqlite(_) => {}
        }
        for sql in tables {
            let sql = sqlx::AssertSqlSafe(format!("DELETE FROM {sql}"));
            match &self.pool {
                Pool::Sqlite(p) => sqlx::query(sql).bind(&like).execute(p).await.map(|_| ())?,
                Pool::Postgres(p) => sqlx::query(sql).bind(&like).execute(p).await.map(|_| ())?,
                Pool::MySql(p) => sqlx::query(sql).bind(&like).execute(p).await.map(|_| ())?,
            }
        }
        Ok(())
    }

    /// PostgreSQL: reclaims the dead rows of both sides' tables (`VACUUM`), so a round starts
    /// with none on either, as autovacuum or backlog's leader would leave them between bursts;
    /// earlier runs' dead rows would otherwise weigh on backlog's table alone. Other databases
    /// reclaim by themselves.
    pub async fn vacuum(&self) -> Res<()> {
        self.vacuum_both("VACUUM").await
    }

    /// Where the server's write-ahead log stands, in bytes: PostgreSQL's WAL insert position,
    /// MariaDB's and MySQL's redo bytes written (`Innodb_os_log_written`). `None` on SQLite,
    /// whose WAL file is reset at each checkpoint.
    pub async fn log_bytes(&self) -> Res<Option<i64>> {
        match &self.pool {
            Pool::Postgres(p) => {
                sqlx::query_scalar("SELECT (pg_current_wal_insert_lsn() - '0/0'::pg_lsn)::bigint")
                    .fetch_one(p)
                    .await
                    .map(Some)
            }
            Pool::MySql(p) => {
                let (_, v): (String, String) =
                    sqlx::query_as("SHOW GLOBAL STATUS LIKE 'Innodb_os_log_written'")
                        .fetch_one(p)
                        .await?;
                Ok(v.parse().ok())
            }
            Pool::Sqlite(_) => Ok(None),
        }
    }

    /// PostgreSQL: `VACUUM ANALYZE` of both sides' tables, so that the statistics say what the
    /// tables hold now (an empty table: no pages, no rows) and plans made next are made on them.
    pub async fn analyze(&self) -> Res<()> {
        self.vacuum_both("VACUUM ANALYZE").await
    }

    /// PostgreSQL: `command` (`VACUUM`, `VACUUM ANALYZE`) on backlog's table and the bare one.
    async fn vacuum_both(&self, command: &str) -> Res<()> {
        if let Pool::Postgres(p) = &self.pool {
            let sql = format!("{command} backlog_job, {}", self.table);
            sqlx::raw_sql(sqlx::AssertSqlSafe(sql)).execute(p).await?;
        }
        Ok(())
    }

    /// Writes out dirty pages now (PostgreSQL `CHECKPOINT`, SQLite a WAL checkpoint), so that
    /// the phase after it does not run into one set off by the phase before. Needs superuser or
    /// the `pg_checkpoint` role on PostgreSQL; without them this says so once and goes on.
    pub async fn checkpoint(&self) -> Res<()> {
        let r = match &self.pool {
            Pool::Postgres(p) => sqlx::raw_sql("CHECKPOINT").execute(p).await.map(|_| ()),
            Pool::Sqlite(p) => sqlx::raw_sql("PRAGMA wal_checkpoint(TRUNCATE)")
                .execute(p)
                .await
                .map(|_| ()),
            Pool::MySql(_) => Ok(()),
        };
        if let Err(e) = r {
            static ONCE: std::sync::Once = std::sync::Once::new();
            ONCE.call_once(|| tracing::warn!("bench: no checkpoint between phases: {e}"));
        }
        Ok(())
    }

    /// Connections open on the database server, of every client (PostgreSQL and MySQL count
    /// the sessions on this database; SQLite has no server: the pool's own).
    pub async fn server_connections(&self) -> Res<i64> {
        match &self.pool {
            Pool::Postgres(p) => {
                sqlx::query_scalar(
                    "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()",
                )
                .fetch_one(p)
                .await
            }
            Pool::MySql(p) => {
                sqlx::query_scalar(
                    "SELECT CAST(count(*) AS SIGNED) FROM information_schema.PROCESSLIST \
                     WHERE db = DATABASE()",
                )
                .fetch_one(p)
                .await
            }
            Pool::Sqlite(p) => Ok(i64::from(p.size())),
        }
    }

    /// Old row versions the database has not reclaimed yet: PostgreSQL's dead tuples of the job
    /// table (its statistics, a little behind), InnoDB's history list length (undo not yet
    /// purged, for every table), SQLite's WAL file in bytes. A transaction left open holds each
    /// of them back.
    pub async fn garbage(&self) -> Res<i64> {
        match &self.pool {
            Pool::Postgres(p) => sqlx::query_scalar(
                "SELECT COALESCE((SELECT n_dead_tup FROM pg_stat_user_tables \
                 WHERE relid = 'backlog_job'::regclass), 0)",
            )
            .fetch_one(p)
            .await,
            Pool::MySql(p) => sqlx::query_scalar(
                "SELECT CAST(COALESCE(MAX(count), 0) AS SIGNED) FROM information_schema.INNODB_METRICS \
                 WHERE name = 'trx_rseg_history_len'",
            )
            .fetch_one(p)
            .await,
            Pool::Sqlite(p) => {
                let file = p.connect_options().get_filename().to_owned();
                let mut wal = file.into_os_string();
                wal.push("-wal");
                Ok(std::fs::metadata(wal).map(|m| m.len() as i64).unwrap_or(0))
            }
        }
    }

    /// Another session holding a transaction open until the returned connection is dropped:
    /// PostgreSQL pins the xmin horizon, InnoDB's purge waits on the read view, SQLite's WAL
    /// cannot be checkpointed past the reader. `kind` says what the session does, `url` where
    /// it runs (a PostgreSQL replica with `hot_standby_feedback = on` pins the primary's
    /// horizon too); by default on the database under test.
    pub async fn hold_transaction(
        &self,
        kind: HoldKind,
        url: Option<&str>,
    ) -> anyhow::Result<Box<dyn std::any::Any + Send>> {
        use anyhow::Context;
        use sqlx::ConnectOptions;
        use std::str::FromStr;
        let write = kind == HoldKind::Write;
        Ok(match &self.pool {
            Pool::Postgres(p) => {
                let options = match url {
                    Some(u) => sqlx::postgres::PgConnectOptions::from_str(u)
                        .with_context(|| format!("--hold-url {u:?}: not a PostgreSQL URL"))?,
                    None => p.connect_options().as_ref().clone(),
                };
                let mut c = options.connect().await?;
                let sql = match write {
                    true => {
                        "CREATE TEMPORARY TABLE backlog_bench_held (at timestamptz); \
                         BEGIN; INSERT INTO backlog_bench_held VALUES (now())"
                    }
                    // A long query on a replica holds its snapshot as this transaction does.
                    // The first read takes the snapshot: a catalog's, since a replica may not
                    // have replayed the schema yet.
                    false => {
                        "BEGIN ISOLATION LEVEL REPEATABLE READ; \
                              SELECT count(*) FROM pg_class"
                    }
                };
                sqlx::raw_sql(sql).execute(&mut c).await?;
                Box::new(c)
            }
            Pool::MySql(p) => {
                let options = match url {
                    Some(u) => sqlx::mysql::MySqlConnectOptions::from_str(u)
                        .with_context(|| format!("--hold-url {u:?}: not a MySQL URL"))?,
                    None => p.connect_options().as_ref().clone(),
                };
                let mut c = options.connect().await?;
                let sql = match write {
                    true => {
                        // No read view: InnoDB's purge goes on past a transaction that
                        // only wrote.
                        "CREATE TEMPORARY TABLE backlog_bench_held (at datetime(6)); \
                         START TRANSACTION; INSERT INTO backlog_bench_held VALUES (now(6))"
                    }
                    false => {
                        "START TRANSACTION WITH CONSISTENT SNAPSHOT; \
                         SELECT count(*) FROM backlog_queue"
                    }
                };
                sqlx::raw_sql(sql).execute(&mut c).await?;
                Box::new(c)
            }
            Pool::Sqlite(p) => {
                // `params::check_hold` refused a URL and a writing session here.
                anyhow::ensure!(url.is_none() && !write, "no such held session on SQLite");
                let mut c = p.connect_options().connect().await?;
                sqlx::raw_sql("BEGIN; SELECT count(*) FROM backlog_job")
                    .execute(&mut c)
                    .await?;
                Box::new(c)
            }
        })
    }

    /// Drops the scratch table (SQLite has none).
    pub async fn drop_table(&self) -> Res<()> {
        let sql = sqlx::AssertSqlSafe(format!("DROP TABLE IF EXISTS {}", self.table));
        match &self.pool {
            Pool::Sqlite(_) => {}
            Pool::Postgres(p) => sqlx::query(sql).execute(p).await.map(|_| ())?,
            Pool::MySql(p) => sqlx::query(sql).execute(p).await.map(|_| ())?,
        }
        Ok(())
    }
}

/// The ids of claimed jobs.
fn ids_of(jobs: &[BareJob]) -> Vec<i64> {
    jobs.iter().map(|j| j.0).collect()
}

/// Integer ids as a comma-separated list, written into MySQL statements that go over the text
/// protocol (no prepared statement to cache; see `mysql_claim`).
fn id_list(ids: &[i64]) -> String {
    ids.iter()
        .map(|i| i.to_string())
        .collect::<Vec<_>>()
        .join(",")
}

/// Runs a bare statement (or transaction) again while PostgreSQL picks it as a deadlock's victim
/// or it gave up waiting on a lock (rolled back whole), as a hand-written loop would and as the
/// runtime does with its own.
/// Claimers that lock rows SKIP LOCKED can still wait on each other when they meet a row whose
/// newer version another is deleting.
pub(crate) async fn retry_deadlocks<T, Fut>(
    call: impl Fn() -> Fut,
) -> Result<T, backlog::sqlx::Error>
where
    Fut: std::future::Future<Output = Result<T, backlog::sqlx::Error>>,
{
    loop {
        match call().await {
            // A deadlock victim (PostgreSQL's code, MySQL's), or (PostgreSQL) a statement that
            // gave up a lock wait after its own lock_timeout: rolled back whole either way.
            Err(backlog::sqlx::Error::Database(e))
                if matches!(e.code().as_deref(), Some("40P01" | "40001" | "55P03")) => {}
            other => return other,
        }
    }
}
