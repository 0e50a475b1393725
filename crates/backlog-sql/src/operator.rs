//! The operations on `backlog_stat` and `backlog_audit`, written once for every backend: the
//! statements differ (each dialect's `queries/` file), the steps do not.

/// The bodies of the `Backend` methods `stat_history`, `stat_totals`, `stat_prune`,
/// `audit_list`, `stat_add` and `stat_snapshot`, as inherent methods of `$backend` (each trait
/// impl delegates to them in one line: `#[async_trait]` cannot rewrite methods a macro adds
/// to it), expanded
/// in the backend's module where its `q!`, pool and row macros are in scope. `$queue_binds`: how
/// many times the statements bind their optional queue filter (MySQL's positional placeholders
/// repeat it).
macro_rules! operator_methods {
    ($backend:ty, queue_binds = $queue_binds:literal) => {
        impl $backend {
            pub(crate) async fn op_stat_history(
                &self,
                queue: Option<&QueueName>,
                since: i64,
            ) -> Result<Vec<StatRow>> {
                let mut query = sqlx::query(q!("stat_history")).bind(since);
                for _ in 0..$queue_binds {
                    query = query.bind(queue.map(|q| q.as_str()));
                }
                let rows = query.fetch_all(&self.pool).await.db()?;
                rows.iter().map(|r| Ok(stat_from_row!(r))).collect()
            }

            pub(crate) async fn op_stat_totals(&self) -> Result<Vec<StatRow>> {
                let rows = sqlx::query(q!("stat_totals"))
                    .fetch_all(&self.pool)
                    .await
                    .db()?;
                rows.iter().map(|r| Ok(stat_from_row!(r))).collect()
            }

            pub(crate) async fn op_stat_prune(&self, before: i64) -> Result<u64> {
                let mut tx = self.pool.begin().await.db()?;
                sqlx::query(q!("stat_fold"))
                    .bind(before)
                    .execute(&mut *tx)
                    .await
                    .db()?;
                let res = sqlx::query(q!("stat_prune"))
                    .bind(before)
                    .execute(&mut *tx)
                    .await
                    .db()?;
                tx.commit().await.db()?;
                Ok(res.rows_affected())
            }

            pub(crate) async fn op_audit_list(
                &self,
                p: &AuditListParams,
            ) -> Result<Vec<AuditEntry>> {
                let mut query = sqlx::query(q!("audit_list")).bind(p.before_id);
                for _ in 0..$queue_binds {
                    query = query.bind(p.queue.as_ref().map(|q| q.as_str()));
                }
                let rows = query
                    .bind(p.limit as i64)
                    .fetch_all(&self.pool)
                    .await
                    .db()?;
                rows.iter().map(|r| Ok(audit_from_row!(r))).collect()
            }

            pub(crate) async fn op_stat_add(&self, rows: &[StatRow]) -> Result<()> {
                let mut tx = self.pool.begin().await.db()?;
                for r in rows {
                    bind_stat_counts!(sqlx::query(q!("stat_add")), r)
                        .execute(&mut *tx)
                        .await
                        .db()?;
                }
                tx.commit().await.db()
            }

            pub(crate) async fn op_stat_snapshot(
                &self,
                minute: i64,
                depths: &[(String, StatDepth)],
            ) -> Result<()> {
                let mut tx = self.pool.begin().await.db()?;
                for (queue, d) in depths {
                    sqlx::query(q!("stat_snapshot"))
                        .bind(queue.as_str())
                        .bind(minute)
                        .bind(d.available)
                        .bind(d.scheduled)
                        .bind(d.running)
                        .bind(d.dead)
                        .execute(&mut *tx)
                        .await
                        .db()?;
                }
                tx.commit().await.db()
            }
        }
    };
}

pub(crate) use operator_methods;
