//! The closed set of job states.

use std::fmt;
use std::str::FromStr;

use crate::Error;

/// The state of a job as stored in the `state` column.
///
/// A few more states are *reported* but not stored: an `available` job whose `run_at` lies in the
/// future is *scheduled*, and one that also carries an error is *waiting to retry*
/// (see [`StateFilter`]). `docs/state-machine.md` lists every transition.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum JobState {
    /// Waiting to be claimed (once `run_at` has come).
    Available,
    /// Claimed by a worker holding a lease.
    Running,
    /// Finished successfully (kept when the queue's retention is `keep`).
    Completed,
    /// Attempts exhausted or discarded; kept for analysis until retried or redriven.
    Dead,
    /// Cancelled by an operator or a handler.
    Cancelled,
    /// Kept back (for example pending review) until released by hand.
    Held,
    /// In an ordered group, behind the jobs of its group that run first: made available when
    /// its group has room (its turn in enqueue order, and fewer than the queue's group
    /// concurrency of the group's jobs available or running).
    Waiting,
}

impl JobState {
    /// Every stored state, in display order.
    pub const ALL: [JobState; 7] = [
        JobState::Available,
        JobState::Running,
        JobState::Completed,
        JobState::Dead,
        JobState::Cancelled,
        JobState::Held,
        JobState::Waiting,
    ];

    /// The name stored in the database.
    pub fn as_str(self) -> &'static str {
        match self {
            JobState::Available => "available",
            JobState::Running => "running",
            JobState::Completed => "completed",
            JobState::Dead => "dead",
            JobState::Cancelled => "cancelled",
            JobState::Held => "held",
            JobState::Waiting => "waiting",
        }
    }

    /// True for states a job never leaves without an operator (completed, dead, cancelled).
    pub fn is_finished(self) -> bool {
        matches!(
            self,
            JobState::Completed | JobState::Dead | JobState::Cancelled
        )
    }
}

impl fmt::Display for JobState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for JobState {
    type Err = Error;

    fn from_str(s: &str) -> Result<Self, Error> {
        JobState::ALL
            .into_iter()
            .find(|st| st.as_str() == s)
            .ok_or_else(|| Error::StateInvalid {
                value: s.to_owned(),
            })
    }
}

/// A state as a user filters by it: a stored state, or one of the reported ones.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StateFilter {
    /// Exactly this stored state (for `available`, only jobs whose `run_at` has come).
    Stored(JobState),
    /// `available` with `run_at` in the future, never failed (attempt 0).
    Scheduled,
    /// `available` with `run_at` in the future and at least one failed attempt.
    Retrying,
}

impl StateFilter {
    /// Every accepted spelling, for error messages and help.
    pub const NAMES: &'static str =
        "available, scheduled, retrying, waiting, running, completed, dead, cancelled, held";
}

impl FromStr for StateFilter {
    type Err = Error;

    fn from_str(s: &str) -> Result<Self, Error> {
        match s {
            "scheduled" => Ok(StateFilter::Scheduled),
            "retrying" => Ok(StateFilter::Retrying),
            other => other.parse().map(StateFilter::Stored),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn states_round_trip_and_reject_unknown() {
        for st in JobState::ALL {
            assert_eq!(st.as_str().parse::<JobState>().unwrap(), st);
        }
        let err = "done".parse::<JobState>().unwrap_err();
        assert!(err.to_string().contains("unknown state \"done\""), "{err}");
        assert_eq!(
            "scheduled".parse::<StateFilter>().unwrap(),
            StateFilter::Scheduled
        );
        assert!("Running".parse::<StateFilter>().is_err());
    }
}
