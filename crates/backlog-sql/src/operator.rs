//! The operations on `backlog_stat` and `backlog_audit`, written once for every backend: the
//! statements differ (each dialect's `queries/` file), the steps do not.

/// The bodies of the `Backend` methods `stat_history`, `stat_totals`, `stat_prune`,
/// `audit_list`, `stat_add` and `stat_snapshot`, as inherent methods of `$backend` (each trait
/// impl delegates to them in one line: `#[async_trait]` cannot rewrite methods a macro adds
/// to it), expanded
/// in the backend's module where its pool and row macros are in scope. `$cat`: the dialect's
/// module of the SQL catalog, whose functions of these statements take the same parameters.
macro_rules! operator_methods {
    ($backend:ty, catalog = $cat:path) => {
        impl $backend {
            pub(crate) async fn op_stat_history(
                &self,
                queue: Option<&QueueName>,
                since: i64,
            ) -> Result<Vec<StatRow>> {
                use $cat as cat;
                let rows = cat::stat_history(since, queue.map(|q| q.as_str()))
                    .query()
                    .fetch_all(&self.pool)
                    .await
                    .db()?;
                rows.iter().map(|r| Ok(stat_from_row!(r))).collect()
            }

            pub(crate) async fn op_stat_totals(&self) -> Result<Vec<StatRow>> {
                use $cat as cat;
                let rows = cat::stat_totals()
                    .query()
                    .fetch_all(&self.pool)
                    .await
                    .db()?;
                rows.iter().map(|r| Ok(stat_from_row!(r))).collect()
            }

            pub(crate) async fn op_stat_prune(&self, before: i64) -> Result<u64> {
                let mut tx = self.pool.begin().await.db()?;
                use $cat as cat;
                cat::stat_fold(before)
                    .query()
                    .execute(&mut *tx)
                    .await
                    .db()?;
                let res = cat::stat_prune(before)
                    .query()
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
                use $cat as cat;
                let queue = p.queue.as_ref().map(|q| q.as_str());
                let rows = cat::audit_list(p.before_id, queue, p.limit as i64)
                    .query()
                    .fetch_all(&self.pool)
                    .await
                    .db()?;
                rows.iter().map(|r| Ok(audit_from_row!(r))).collect()
            }

            pub(crate) async fn op_stat_add(&self, rows: &[StatRow]) -> Result<()> {
                use $cat as cat;
                let mut tx = self.pool.begin().await.db()?;
                for r in rows {
                    let c = &r.counts;
                    let w = &c.wait;
                    #[rustfmt::skip]
                    let stmt = cat::stat_add(
                        r.queue.as_str(), r.minute, c.enqueued, c.started, c.completed, c.failed,
                        c.dead, c.rescued, c.wait_sum_us, w[0], w[1], w[2], w[3], w[4], w[5], w[6],
                    );
                    stmt.query()
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
                use $cat as cat;
                let mut tx = self.pool.begin().await.db()?;
                for (queue, d) in depths {
                    cat::stat_snapshot(queue, minute, d.available, d.scheduled, d.running, d.dead)
                        .query()
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
