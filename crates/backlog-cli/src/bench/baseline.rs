//! The database's own ceiling: the same work as bare SQL, in the fewest statements possible, on
//! the same pool. Rows go into `backlog_job` like any producer's, so the two sides share tables,
//! indexes and triggers, and each ratio compares like with like.

use backlog::sqlx::{self, MySqlPool, PgPool, SqlitePool};
use backlog::{Client, SqlBackend};

/// A bare-SQL runner over the client's own pool.
#[derive(Clone)]
pub enum Baseline {
    Sqlite(SqlitePool),
    Postgres(PgPool),
    MySql(MySqlPool),
}

type Res<T> = Result<T, sqlx::Error>;

impl Baseline {
    pub fn of(client: &Client) -> anyhow::Result<Baseline> {
        Ok(match client.sql() {
            Some(SqlBackend::Sqlite(b)) => Baseline::Sqlite(b.pool().clone()),
            Some(SqlBackend::Postgres(b)) => Baseline::Postgres(b.pool().clone()),
            Some(SqlBackend::MySql(b)) => Baseline::MySql(b.pool().clone()),
            None => anyhow::bail!("the benchmark needs one of the built-in backends"),
        })
    }

    /// One single-row INSERT.
    pub async fn insert_one(&self, queue: &str, payload: &str) -> Res<()> {
        match self {
            Baseline::Sqlite(p) => {
                sqlx::query("INSERT INTO backlog_job (queue, payload) VALUES (?, ?)")
                    .bind(queue)
                    .bind(payload)
                    .execute(p)
                    .await?;
            }
            Baseline::Postgres(p) => {
                sqlx::query("INSERT INTO backlog_job (queue, payload) VALUES ($1, $2::jsonb)")
                    .bind(queue)
                    .bind(payload)
                    .execute(p)
                    .await?;
            }
            Baseline::MySql(p) => {
                sqlx::query("INSERT INTO backlog_job (queue, payload) VALUES (?, ?)")
                    .bind(queue)
                    .bind(payload)
                    .execute(p)
                    .await?;
            }
        }
        Ok(())
    }

    /// One multi-row INSERT of `payloads` into `queue`.
    pub async fn insert_many(&self, queue: &str, payloads: &[String]) -> Res<()> {
        match self {
            Baseline::Sqlite(p) => {
                let mut qb = sqlx::QueryBuilder::<sqlx::Sqlite>::new(
                    "INSERT INTO backlog_job (queue, payload) ",
                );
                qb.push_values(payloads, |mut b, pl| {
                    b.push_bind(queue).push_bind(pl);
                });
                qb.build().execute(p).await?;
            }
            Baseline::Postgres(p) => {
                sqlx::query(
                    "INSERT INTO backlog_job (queue, payload) \
                     SELECT $1, p::jsonb FROM UNNEST($2::text[]) AS t(p)",
                )
                .bind(queue)
                .bind(payloads)
                .execute(p)
                .await?;
            }
            Baseline::MySql(p) => {
                let mut qb = sqlx::QueryBuilder::<sqlx::MySql>::new(
                    "INSERT INTO backlog_job (queue, payload) ",
                );
                qb.push_values(payloads, |mut b, pl| {
                    b.push_bind(queue).push_bind(pl);
                });
                qb.build().execute(p).await?;
            }
        }
        Ok(())
    }

    /// Claims up to `limit` due jobs of `queue` and then deletes them (a no-op job completed
    /// with retention `delete`): one claim and one completion statement per batch (MySQL, without
    /// `UPDATE … RETURNING`, needs a locking read and an update in one transaction). Returns how
    /// many it took.
    pub async fn claim_complete(
        &self,
        queue: &str,
        limit: i64,
        now: i64,
        token: i64,
    ) -> Res<usize> {
        let expires = now + 30_000_000;
        match self {
            Baseline::Sqlite(p) => {
                let ids: Vec<i64> = sqlx::query_scalar(
                    "UPDATE backlog_job SET state = 'running', attempt = attempt + 1, \
                     lease_token = ?1, lease_expires_at = ?2, attempted_at = ?3 \
                     WHERE id IN (SELECT id FROM backlog_job WHERE queue = ?4 AND state = 'available' \
                     AND run_at <= ?3 ORDER BY priority, run_at, id LIMIT ?5) RETURNING id",
                )
                .bind(token)
                .bind(expires)
                .bind(now)
                .bind(queue)
                .bind(limit)
                .fetch_all(p)
                .await?;
                if !ids.is_empty() {
                    let json = serde_json::to_string(&ids).expect("ids");
                    sqlx::query(
                        "DELETE FROM backlog_job WHERE id IN (SELECT value FROM json_each(?1)) \
                         AND lease_token = ?2",
                    )
                    .bind(json)
                    .bind(token)
                    .execute(p)
                    .await?;
                }
                Ok(ids.len())
            }
            Baseline::Postgres(p) => {
                let ids: Vec<i64> = sqlx::query_scalar(
                    "UPDATE backlog_job SET state = 'running', attempt = attempt + 1, \
                     lease_token = $1, lease_expires_at = $2, attempted_at = $3 \
                     WHERE id IN (SELECT id FROM backlog_job WHERE queue = $4 AND state = 'available' \
                     AND run_at <= $3 ORDER BY priority, run_at, id LIMIT $5 FOR UPDATE SKIP LOCKED) \
                     RETURNING id",
                )
                .bind(token)
                .bind(expires)
                .bind(now)
                .bind(queue)
                .bind(limit)
                .fetch_all(p)
                .await?;
                if !ids.is_empty() {
                    sqlx::query("DELETE FROM backlog_job WHERE id = ANY($1) AND lease_token = $2")
                        .bind(&ids)
                        .bind(token)
                        .execute(p)
                        .await?;
                }
                Ok(ids.len())
            }
            Baseline::MySql(p) => {
                let mut tx = p.begin().await?;
                let ids: Vec<i64> = sqlx::query_scalar(
                    "SELECT id FROM backlog_job FORCE INDEX (backlog_job_claim) \
                     WHERE queue = ? AND state = 'available' AND run_at <= ? \
                     ORDER BY priority, run_at, id LIMIT ? FOR UPDATE SKIP LOCKED",
                )
                .bind(queue)
                .bind(now)
                .bind(limit)
                .fetch_all(&mut *tx)
                .await?;
                if ids.is_empty() {
                    tx.commit().await?;
                    return Ok(0);
                }
                let list = ids
                    .iter()
                    .map(|i| i.to_string())
                    .collect::<Vec<_>>()
                    .join(",");
                sqlx::query(sqlx::AssertSqlSafe(format!(
                    "UPDATE backlog_job SET state = 'running', attempt = attempt + 1, \
                     lease_token = ?, lease_expires_at = ?, attempted_at = ? WHERE id IN ({list})"
                )))
                .bind(token)
                .bind(expires)
                .bind(now)
                .execute(&mut *tx)
                .await?;
                tx.commit().await?;
                sqlx::query(sqlx::AssertSqlSafe(format!(
                    "DELETE FROM backlog_job WHERE id IN ({list}) AND lease_token = ?"
                )))
                .bind(token)
                .execute(p)
                .await?;
                Ok(ids.len())
            }
        }
    }

    /// Deletes every job of the benchmark's queues (they share a prefix).
    pub async fn clean(&self, prefix: &str) -> Res<()> {
        let like = format!("{prefix}%");
        match self {
            Baseline::Sqlite(p) => {
                sqlx::query("DELETE FROM backlog_job WHERE queue LIKE ?")
                    .bind(&like)
                    .execute(p)
                    .await?;
                sqlx::query("DELETE FROM backlog_queue WHERE name LIKE ?")
                    .bind(&like)
                    .execute(p)
                    .await?;
            }
            Baseline::Postgres(p) => {
                sqlx::query("DELETE FROM backlog_job WHERE queue LIKE $1")
                    .bind(&like)
                    .execute(p)
                    .await?;
                sqlx::query("DELETE FROM backlog_queue WHERE name LIKE $1")
                    .bind(&like)
                    .execute(p)
                    .await?;
            }
            Baseline::MySql(p) => {
                sqlx::query("DELETE FROM backlog_job WHERE queue LIKE ?")
                    .bind(&like)
                    .execute(p)
                    .await?;
                sqlx::query("DELETE FROM backlog_queue WHERE name LIKE ?")
                    .bind(&like)
                    .execute(p)
                    .await?;
            }
        }
        Ok(())
    }
}
