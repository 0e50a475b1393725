//! What processes coordinate on: the leadership of maintenance (`backlog_leader`) and the ticks
//! of periodic jobs (`backlog_cron`).

use backlog_core::{CronFireParams, EnqueueOutcome, LeaderParams, Result};

use crate::state::{Leader, State};

impl State {
    /// `leader_elect.sql`: a free or expired leadership is taken (a new term), the holder's own
    /// is renewed (the same term).
    pub fn leader_elect(&mut self, p: &LeaderParams) -> Option<i64> {
        let Some(leader) = self.leaders.get_mut(&p.name) else {
            let leader = Leader {
                holder: p.holder.clone(),
                term: 1,
                expires_at: p.expires_at,
            };
            self.leaders.insert(p.name.clone(), leader);
            return Some(1);
        };
        if leader.holder != p.holder {
            if leader.expires_at >= p.now {
                return None;
            }
            leader.holder.clone_from(&p.holder);
            leader.term += 1;
        }
        leader.expires_at = p.expires_at;
        Some(leader.term)
    }

    /// `leader_resign.sql`: the holder's leadership expires at once.
    pub fn leader_resign(&mut self, name: &str, holder: &str) {
        if let Some(leader) = self.leaders.get_mut(name)
            && leader.holder == holder
        {
            leader.expires_at = 0;
        }
    }

    /// `cron_advance.sql`, then the job's insert: only for a tick later than the last fired,
    /// and the tick is recorded only when the job went in.
    pub fn cron_fire(&mut self, p: CronFireParams) -> Result<Option<EnqueueOutcome>> {
        if self.cron.get(&p.name).is_some_and(|&last| last >= p.tick) {
            return Ok(None);
        }
        let outcome = self.job_insert(vec![p.job], p.now)?.pop();
        self.cron.insert(p.name, p.tick);
        Ok(outcome)
    }
}
