//! The job table and its archive, with the indexes the SQL schema gives them: the claim index
//! (available jobs of a queue by priority, due time and id), the lease index (running jobs by
//! lease expiry) and the partial unique index on unfinished jobs' keys. Every change of a row
//! goes through [`Table::update`], which keeps the indexes in step with it.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use backlog_core::{Job, JobState, Kind, Ordering};

/// The jobs, as `backlog_job` and `backlog_job_archive` hold them.
#[derive(Default)]
pub(crate) struct Table {
    rows: BTreeMap<i64, Job>,
    archive: BTreeMap<i64, Job>,
    /// The last id handed out: like SQLite's AUTOINCREMENT, an id is never reused.
    last_id: i64,
    index: Index,
}

#[derive(Default)]
struct Index {
    /// Available jobs of each queue, in FIFO claim order: (priority, run_at, id).
    available: HashMap<String, BTreeSet<(i16, i64, i64)>>,
    /// Running jobs by lease expiry: (lease_expires_at, id).
    leases: BTreeSet<(i64, i64)>,
    /// (queue, unique key) → the unfinished job that holds the key.
    unique: HashMap<(String, String), i64>,
}

/// Whether a job of `kind` is among `kinds` (empty: any kind, a job without one included), as
/// the claim's and the pending count's `kind IN (…)` decide.
pub(crate) fn kind_in(kinds: &[Kind], kind: Option<&str>) -> bool {
    kinds.is_empty() || kinds.iter().any(|k| Some(k.as_str()) == kind)
}

/// Whether a job in this state holds its unique key (`backlog_job_unique`'s predicate).
pub(crate) fn holds_key(state: JobState) -> bool {
    matches!(
        state,
        JobState::Available | JobState::Running | JobState::Held | JobState::Waiting
    )
}

impl Index {
    fn add(&mut self, job: &Job) {
        match (job.state, job.lease_expires_at) {
            (JobState::Available, _) => {
                self.available
                    .entry(job.queue.clone())
                    .or_default()
                    .insert((job.priority, job.run_at, job.id));
            }
            (JobState::Running, Some(expires)) => {
                self.leases.insert((expires, job.id));
            }
            _ => {}
        }
        if let Some(key) = &job.unique_key
            && holds_key(job.state)
        {
            self.unique.insert((job.queue.clone(), key.clone()), job.id);
        }
    }

    fn remove(&mut self, job: &Job) {
        match (job.state, job.lease_expires_at) {
            (JobState::Available, _) => {
                if let Some(set) = self.available.get_mut(&job.queue) {
                    set.remove(&(job.priority, job.run_at, job.id));
                    if set.is_empty() {
                        self.available.remove(&job.queue);
                    }
                }
            }
            (JobState::Running, Some(expires)) => {
                self.leases.remove(&(expires, job.id));
            }
            _ => {}
        }
        if let Some(key) = &job.unique_key
            && holds_key(job.state)
        {
            self.unique.remove(&(job.queue.clone(), key.clone()));
        }
    }
}

impl Table {
    /// A fresh id.
    pub fn next_id(&mut self) -> i64 {
        self.last_id += 1;
        self.last_id
    }

    /// Adds a row (its id from [`Table::next_id`]).
    pub fn insert(&mut self, job: Job) {
        self.index.add(&job);
        self.rows.insert(job.id, job);
    }

    /// A row of the job table.
    pub fn get(&self, id: i64) -> Option<&Job> {
        self.rows.get(&id)
    }

    /// A row of the job table, or else of the archive (what `job_get` reads).
    pub fn get_or_archived(&self, id: i64) -> Option<&Job> {
        self.rows.get(&id).or_else(|| self.archive.get(&id))
    }

    /// A row of the archive.
    pub fn archived(&self, id: i64) -> Option<&Job> {
        self.archive.get(&id)
    }

    /// Changes a row of the job table, keeping the indexes in step.
    pub fn update<R>(&mut self, id: i64, f: impl FnOnce(&mut Job) -> R) -> Option<R> {
        let job = self.rows.get_mut(&id)?;
        self.index.remove(job);
        let r = f(job);
        self.index.add(job);
        Some(r)
    }

    /// Deletes a row of the job table.
    pub fn remove(&mut self, id: i64) -> Option<Job> {
        let job = self.rows.remove(&id)?;
        self.index.remove(&job);
        Some(job)
    }

    /// Deletes a row of the archive.
    pub fn remove_archived(&mut self, id: i64) -> Option<Job> {
        self.archive.remove(&id)
    }

    /// Moves a row of the job table to the archive, changed by `f` on the way.
    pub fn move_to_archive(&mut self, id: i64, f: impl FnOnce(&mut Job)) {
        if let Some(mut job) = self.remove(id) {
            f(&mut job);
            job.archived = true;
            self.archive.insert(id, job);
        }
    }

    /// The rows of the job table, by id.
    pub fn rows(&self) -> impl Iterator<Item = &Job> {
        self.rows.values()
    }

    /// The rows of the job table with an id greater than `id`, by id.
    pub fn rows_after(&self, id: i64) -> impl Iterator<Item = &Job> {
        self.rows.range(id.saturating_add(1)..).map(|(_, job)| job)
    }

    /// The rows of the archive.
    pub fn archive_rows(&self) -> impl Iterator<Item = &Job> {
        self.archive.values()
    }

    /// The unfinished job holding a unique key in a queue.
    pub fn key_holder(&self, queue: &str, key: &str) -> Option<i64> {
        self.index
            .unique
            .get(&(queue.to_owned(), key.to_owned()))
            .copied()
    }

    /// Up to `limit` ids of a queue's due available jobs of `kinds` (empty: any kind), in the
    /// order a claim takes them: by priority, then due time and id, oldest first (FIFO) or
    /// newest first (LIFO).
    pub fn claimable(
        &self,
        queue: &str,
        kinds: &[Kind],
        now: i64,
        order: Ordering,
        limit: usize,
    ) -> Vec<i64> {
        let mut out = Vec::new();
        let Some(set) = self.index.available.get(queue) else {
            return out;
        };
        if limit == 0 {
            return out;
        }
        let mut take = |&(_, _, id): &(i16, i64, i64)| {
            if kind_in(kinds, self.rows.get(&id).and_then(|j| j.kind.as_deref())) {
                out.push(id);
            }
            out.len() == limit
        };
        // One priority at a time: within it the due jobs are a range, walked either way.
        let mut priority = set.first().map(|k| k.0);
        while let Some(p) = priority {
            let mut due = set.range((p, i64::MIN, i64::MIN)..=(p, now, i64::MAX));
            let full = match order {
                Ordering::Fifo => due.any(&mut take),
                Ordering::Lifo => due.rev().any(&mut take),
            };
            if full {
                break;
            }
            priority = p
                .checked_add(1)
                .and_then(|next| set.range((next, i64::MIN, i64::MIN)..).next())
                .map(|k| k.0);
        }
        out
    }

    /// Up to `limit` ids of running jobs whose lease expired before `now`, oldest expiry first.
    pub fn expired(&self, now: i64, limit: usize) -> Vec<i64> {
        self.index
            .leases
            .range(..(now, i64::MIN))
            .take(limit)
            .map(|&(_, id)| id)
            .collect()
    }

    /// Per queue with available jobs, the `run_at` of its oldest due one.
    pub fn oldest_due(&self, now: i64) -> Vec<(String, i64)> {
        let mut out: Vec<(String, i64)> = self
            .index
            .available
            .iter()
            .filter_map(|(queue, set)| {
                let oldest = set.iter().map(|k| k.1).filter(|&t| t <= now).min()?;
                Some((queue.clone(), oldest))
            })
            .collect();
        out.sort();
        out
    }
}
