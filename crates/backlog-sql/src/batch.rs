//! Enqueue logic shared by every backend: de-duplicating unique keys inside a batch, and
//! resolving keys that were already taken to the existing job's id.

use std::collections::HashMap;

use backlog_core::{EnqueueOutcome, NewJob, RateLimit, Result};

use crate::rows::unique_slot;

/// Most rows in one INSERT statement (SQLite allows 32,766 bound values; at most 9 per row).
pub(crate) const INSERT_CHUNK: usize = 1000;

/// Whether a batch goes in as one INSERT statement that needs nothing after it: no unique key
/// (which may need a look-up), and no more rows than one chunk. Such a batch needs no transaction
/// around it: one statement is atomic on its own, and skipping BEGIN and COMMIT saves two of the
/// three round trips of a single enqueue.
pub(crate) fn one_statement(rows: &[NewJob]) -> bool {
    rows.len() <= INSERT_CHUNK
        && rows
            .iter()
            .all(|j| j.unique_key.is_none() && j.group.is_none() && j.depends_on.is_empty())
}

/// What a dialect does for [`attach_parents`], in the inserting transaction (schema version 20).
pub(crate) trait DepOps {
    /// Locks the unfinished ones of `parents` (sorted, distinct), in id order, and marks them
    /// as having dependents; returns them.
    async fn deps_mark(&mut self, parents: &[i64]) -> Result<Vec<i64>>;
    /// The state of each of `ids` that is a job, wherever it is kept.
    async fn deps_states(&mut self, ids: &[i64]) -> Result<Vec<(i64, String)>>;
    /// Inserts the edges: (parent, child, policy).
    async fn deps_link(&mut self, edges: &[(i64, i64, &'static str)]) -> Result<()>;
    /// Makes new jobs wait for `left` parents each.
    async fn deps_wait(&mut self, left: i32, ids: &[i64]) -> Result<()>;
    /// Cancels a new job, one of whose parents failed already, with this error; `left`: its
    /// parents not yet ended.
    async fn deps_cancel(&mut self, id: i64, left: i32, now: i64, error: &str) -> Result<()>;
}

/// Whether any row of a batch waits for other jobs.
pub(crate) fn any_dependent(rows: &[NewJob]) -> bool {
    rows.iter().any(|j| !j.depends_on.is_empty())
}

/// Ties the jobs an inserted batch created to their parents, in the inserting transaction (after
/// [`insert_all`]; `per_row` is its answer for `rows`). Each parent still unfinished is locked
/// and marked as having dependents, and counted in its children's `deps_left`: those wait. A
/// parent that ended counts as ended: one that ended dead or cancelled cancels a child whose
/// policy is `cancel`, at once. A parent that is not a job (never was, or was pruned) fails the
/// whole insert with [`backlog_core::Error::ParentNotFound`], and the transaction's rollback takes
/// the batch back. Jobs not created (a unique key held already) get no edges: the job holding
/// the key is the answer, as it is.
pub(crate) async fn attach_parents<D: DepOps>(
    conn: &mut D,
    rows: &[NewJob],
    per_row: &[(i64, bool)],
    now: i64,
) -> Result<()> {
    let created = || {
        rows.iter()
            .zip(per_row)
            .filter(|(row, (_, created))| *created && !row.depends_on.is_empty())
    };
    let mut parents: Vec<i64> = created()
        .flat_map(|(row, _)| row.depends_on.iter().map(|d| d.parent))
        .collect();
    if parents.is_empty() {
        return Ok(());
    }
    parents.sort_unstable();
    parents.dedup();
    let unfinished: std::collections::HashSet<i64> =
        conn.deps_mark(&parents).await?.into_iter().collect();
    let ended: Vec<i64> = parents
        .iter()
        .copied()
        .filter(|p| !unfinished.contains(p))
        .collect();
    let mut states: HashMap<i64, String> = HashMap::new();
    if !ended.is_empty() {
        states.extend(conn.deps_states(&ended).await?);
    }
    if let Some(&parent) = ended.iter().find(|p| !states.contains_key(p)) {
        return Err(backlog_core::Error::ParentNotFound { parent });
    }
    let mut edges = Vec::new();
    let mut waits: std::collections::BTreeMap<i32, Vec<i64>> = Default::default();
    let mut doomed = Vec::new();
    for (row, &(child, _)) in created() {
        let mut left = 0;
        let mut cause = None;
        for d in &row.depends_on {
            edges.push((d.parent, child, d.on_failure.as_str()));
            if unfinished.contains(&d.parent) {
                left += 1;
                continue;
            }
            let how = &states[&d.parent];
            if how != "completed" && d.on_failure == backlog_core::OnParentFailure::Cancel {
                cause.get_or_insert((d.parent, how.as_str()));
            }
        }
        match cause {
            Some((parent, how)) => doomed.push((
                child,
                left,
                format!("cancelled: job {parent}, which it waited for, ended {how}"),
            )),
            None if left > 0 => waits.entry(left).or_default().push(child),
            None => {}
        }
    }
    for chunk in edges.chunks(INSERT_CHUNK) {
        conn.deps_link(chunk).await?;
    }
    for (left, ids) in waits {
        for chunk in ids.chunks(INSERT_CHUNK) {
            conn.deps_wait(left, chunk).await?;
        }
    }
    for (child, left, error) in doomed {
        conn.deps_cancel(child, left, now, &error).await?;
    }
    Ok(())
}

/// What a dialect does to put just-inserted jobs in their ordered groups, inside the inserting
/// transaction.
pub(crate) trait GroupOps {
    /// Sets the group of each job (by id) and makes it `waiting`.
    async fn group_set(&mut self, ids: &[i64], groups: &[String]) -> Result<()>;
    /// Takes the lock rows of these groups (sorted, distinct) for the rest of the transaction.
    async fn group_lock(&mut self, queue: &str, groups: &[String]) -> Result<()>;
    /// Promotes the next waiting jobs of these groups, locked, where there is room; how many.
    async fn group_promote_locked(
        &mut self,
        queue: &str,
        groups: &[String],
        now: i64,
    ) -> Result<u64>;
    /// The stored rate-limit times of these groups (sorted, distinct), locked.
    async fn group_rate_get(
        &mut self,
        queue: &str,
        groups: &[String],
    ) -> Result<Vec<(String, Option<i64>)>>;
    /// Stores the rate-limit times of groups, and moves paced jobs' run_at: `rates` are
    /// (group, rate_at), `paced` (job id, run_at).
    async fn group_rate_set(
        &mut self,
        queue: &str,
        rates: &[(String, i64)],
        paced: &[(i64, i64)],
    ) -> Result<()>;
    /// Paces jobs just promoted (`promoted`: id and group, one job per group) under the queue's
    /// group rate limit: each group's start taken from its bucket (`RateLimit::pace`), and a job
    /// the bucket does not let start yet made due when it does. Under the groups' locks.
    async fn group_pace(
        &mut self,
        queue: &str,
        promoted: &[(i64, String)],
        rate: RateLimit,
        now: i64,
    ) -> Result<()> {
        let mut groups: Vec<String> = promoted.iter().map(|(_, g)| g.clone()).collect();
        groups.sort_unstable();
        groups.dedup();
        let stored: HashMap<String, Option<i64>> = self
            .group_rate_get(queue, &groups)
            .await?
            .into_iter()
            .collect();
        let mut rates: HashMap<String, i64> = HashMap::new();
        let mut paced = vec![];
        let mut jobs = promoted.to_vec();
        jobs.sort_unstable();
        for (id, group) in jobs {
            let at = rates
                .get(&group)
                .copied()
                .or(stored.get(&group).copied().flatten());
            let (start, next) = rate.pace(at, now);
            rates.insert(group, next);
            if start > now {
                paced.push((id, start));
            }
        }
        let mut rates: Vec<(String, i64)> = rates.into_iter().collect();
        rates.sort_unstable();
        self.group_rate_set(queue, &rates, &paced).await
    }
    /// Locks these groups and promotes in them.
    async fn group_promote_on(&mut self, queue: &str, groups: &[String], now: i64) -> Result<u64> {
        self.group_lock(queue, groups).await?;
        self.group_promote_locked(queue, groups, now).await
    }
}

/// Puts the rows of an inserted batch that were created with a group key in their groups, and
/// promotes in those groups: a job whose turn it is becomes available at once, in the same
/// commit as its insert. `per_row` is [`insert_all`]'s answer for `rows`.
pub(crate) async fn place_in_groups<G: GroupOps>(
    conn: &mut G,
    rows: &[NewJob],
    per_row: &[(i64, bool)],
    now: i64,
) -> Result<()> {
    let mut by_queue: std::collections::BTreeMap<&str, (Vec<i64>, Vec<String>)> =
        Default::default();
    for (row, &(id, created)) in rows.iter().zip(per_row) {
        if let (Some(group), true) = (&row.group, created) {
            let (ids, groups) = by_queue.entry(row.queue.as_str()).or_default();
            ids.push(id);
            groups.push(group.as_str().to_owned());
        }
    }
    for (queue, (ids, mut groups)) in by_queue {
        conn.group_set(&ids, &groups).await?;
        groups.sort_unstable();
        groups.dedup();
        conn.group_promote_on(queue, &groups, now).await?;
    }
    Ok(())
}

/// Whether any row of a batch has a group key.
pub(crate) fn any_grouped(rows: &[NewJob]) -> bool {
    rows.iter().any(|j| j.group.is_some())
}

/// Most promotion rounds in one call: a round promotes one job per group with room, so a group
/// concurrency of K takes K rounds (and one more that finds nothing).
pub(crate) const PROMOTE_ROUNDS: usize = 64;

/// Whether the rows differ in their payload alone (one queue, kind, priority, due time, attempt
/// limit and trace context; no unique key): they can go in with those values bound once.
pub(crate) fn uniform(rows: &[NewJob]) -> bool {
    let Some(first) = rows.first() else {
        return false;
    };
    rows.iter().all(|j| {
        j.unique_key.is_none()
            && j.queue == first.queue
            && j.kind == first.kind
            && j.priority == first.priority
            && j.run_at == first.run_at
            && j.max_attempts == first.max_attempts
            && j.trace_context == first.trace_context
    })
}

/// Rows of a batch with duplicate unique keys folded into their first occurrence.
pub(crate) struct Deduped {
    /// The rows to insert.
    pub rows: Vec<NewJob>,
    /// For each input job, the index of its row.
    pub map: Vec<usize>,
}

impl Deduped {
    pub fn new(jobs: Vec<NewJob>) -> Self {
        if jobs.iter().all(|j| j.unique_key.is_none()) {
            // Nothing to fold: the batch as it came, without moving a row.
            let map = (0..jobs.len()).collect();
            return Deduped { rows: jobs, map };
        }
        let mut seen: HashMap<String, usize> = HashMap::new();
        let mut rows = Vec::with_capacity(jobs.len());
        let mut map = Vec::with_capacity(jobs.len());
        for job in jobs {
            if let Some(key) = &job.unique_key {
                let slot = unique_slot(job.queue.as_str(), key.as_str());
                if let Some(&i) = seen.get(&slot) {
                    map.push(i);
                    continue;
                }
                seen.insert(slot, rows.len());
            }
            map.push(rows.len());
            rows.push(job);
        }
        Deduped { rows, map }
    }

    /// The unique slot of each row, if it has a key.
    pub fn slots(rows: &[NewJob]) -> Vec<Option<String>> {
        rows.iter()
            .map(|j| {
                j.unique_key
                    .as_ref()
                    .map(|k| unique_slot(j.queue.as_str(), k.as_str()))
            })
            .collect()
    }

    /// Outcomes in input order from each row's (id, created).
    pub fn outcomes(&self, per_row: &[(i64, bool)]) -> Vec<EnqueueOutcome> {
        let mut first = vec![true; per_row.len()];
        self.map
            .iter()
            .map(|&r| {
                let (id, created) = per_row[r];
                let out = EnqueueOutcome {
                    id,
                    created: created && first[r],
                };
                first[r] = false;
                out
            })
            .collect()
    }
}

/// What a backend does for [`resolve`].
pub(crate) trait InsertOps {
    /// Inserts rows (one statement per chunk); an id per row, `None` where the key was taken.
    async fn insert(&mut self, rows: &[NewJob]) -> Result<Vec<Option<i64>>>;
    /// The unfinished job holding this row's unique key, if any.
    async fn find(&mut self, row: &NewJob) -> Result<Option<i64>>;
}

/// Inserts a de-duplicated batch and resolves rows whose unique key was taken: looks the existing
/// job up, and inserts the row after all if that job finished in the meantime.
pub(crate) async fn insert_all<O: InsertOps>(
    ops: &mut O,
    rows: &[NewJob],
) -> Result<Vec<(i64, bool)>> {
    let mut got = ops.insert(rows).await?;
    let mut out = Vec::with_capacity(rows.len());
    for (i, row) in rows.iter().enumerate() {
        if let Some(id) = got[i].take() {
            out.push((id, true));
            continue;
        }
        let mut resolved = None;
        for _ in 0..10 {
            if let Some(id) = ops.find(row).await? {
                resolved = Some((id, false));
                break;
            }
            if let Some(Some(id)) = ops.insert(std::slice::from_ref(row)).await?.first() {
                resolved = Some((*id, true));
                break;
            }
        }
        out.push(resolved.ok_or_else(|| backlog_core::Error::Database {
            kind: backlog_core::DbErrorKind::SerializationFailure,
            source: "unique key kept changing hands while enqueueing".into(),
        })?);
    }
    Ok(out)
}

/// A promotion's rows as the dialects' `group_promote` return them: (id, group, the queue's group
/// concurrency, its group rate limit's starts and period in milliseconds).
pub(crate) type Promoted = (i64, String, i32, Option<i32>, i64);

/// The group rate limit the rows of a promotion carry (the queue's, the same on every row).
pub(crate) fn group_rate_of(rows: &[Promoted]) -> Option<RateLimit> {
    let &(_, _, _, starts, period_ms) = rows.first()?;
    Some(RateLimit {
        starts: starts?.max(1) as u32,
        period: std::time::Duration::from_millis(period_ms.max(1) as u64),
    })
}

/// Paces the jobs of one promotion round where the queue has a group rate limit; whether another
/// round may promote more (a group concurrency above 1).
pub(crate) async fn after_round<G: GroupOps>(
    conn: &mut G,
    queue: &str,
    rows: Vec<Promoted>,
    now: i64,
) -> Result<bool> {
    let more = rows.first().is_some_and(|r| r.2 > 1);
    if let Some(rate) = group_rate_of(&rows) {
        let promoted: Vec<(i64, String)> = rows.into_iter().map(|r| (r.0, r.1)).collect();
        conn.group_pace(queue, &promoted, rate, now).await?;
    }
    Ok(more)
}
