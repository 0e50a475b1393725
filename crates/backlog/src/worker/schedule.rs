//! Periodic jobs: when each fires ([`Schedule`]), and which tick a leader has fired already
//! (`Fired`). The database makes each tick fire once across processes (`cron_fire`).

use std::collections::HashMap;
use std::str::FromStr;
use std::time::Duration;

use crate::{Error, NewJob, Result};

/// When a periodic job fires.
#[derive(Debug, Clone)]
pub enum Schedule {
    /// At every multiple of this interval since the Unix epoch.
    Every(Duration),
    /// At the times a cron expression names (UTC), e.g. `0 3 * * *`.
    Cron(Box<croner::Cron>),
}

impl Schedule {
    /// Reads a cron expression (5 or 6 fields).
    pub fn cron(expr: &str) -> Result<Self> {
        croner::Cron::from_str(expr)
            .map(|c| Schedule::Cron(Box::new(c)))
            .map_err(|e| Error::OptionInvalid {
                what: "cron expression",
                value: format!("{expr} ({e})"),
                expected: "a cron expression such as \"0 3 * * *\"",
            })
    }

    /// What it is, for people: `every 30s`, or the cron expression as given.
    pub fn describe(&self) -> String {
        match self {
            Schedule::Every(d) => format!("every {}", crate::format_duration(*d)),
            Schedule::Cron(c) => c.as_str().to_owned(),
        }
    }

    /// The first tick after `now` (µs), if there is one.
    pub fn next_tick(&self, now: i64) -> Option<i64> {
        match self {
            Schedule::Every(d) => {
                let d = d.as_micros().max(1) as i64;
                Some((now.div_euclid(d) + 1) * d)
            }
            Schedule::Cron(c) => {
                let t = chrono::DateTime::from_timestamp_micros(now)?;
                c.find_next_occurrence(&t, false)
                    .ok()
                    .map(|t| t.timestamp_micros())
            }
        }
    }

    /// The latest tick at or before `now` (microseconds since the epoch).
    pub fn last_tick(&self, now: i64) -> Option<i64> {
        match self {
            Schedule::Every(d) => {
                let d = d.as_micros().max(1) as i64;
                Some(now.div_euclid(d) * d)
            }
            Schedule::Cron(c) => {
                let t = chrono::DateTime::from_timestamp_micros(now)?;
                c.find_previous_occurrence(&t, true)
                    .ok()
                    .map(|t| t.timestamp_micros())
            }
        }
    }
}

/// A job enqueued once per tick of its schedule by the leader, however many processes run.
/// Ticks missed while no leader ran are not made up: the latest tick fires, once.
#[derive(Debug, Clone)]
pub struct PeriodicJob {
    /// Unique name of the schedule.
    pub name: String,
    /// When it fires.
    pub schedule: Schedule,
    /// What is enqueued (`run_at` is set to the tick).
    pub job: NewJob,
}

impl PeriodicJob {
    /// A periodic job.
    pub fn new(name: impl Into<String>, schedule: Schedule, job: NewJob) -> Self {
        PeriodicJob {
            name: name.into(),
            schedule,
            job,
        }
    }
}

/// The latest tick this process fired of each periodic job.
#[derive(Debug, Default)]
pub(crate) struct Fired(HashMap<String, i64>);

impl Fired {
    /// The tick `job` is due to fire for at `now`: its schedule's latest, unless this process
    /// fired that one already. Ticks missed meanwhile are not made up.
    pub fn due(&self, job: &PeriodicJob, now: i64) -> Option<i64> {
        let tick = job.schedule.last_tick(now)?;
        match self.0.get(&job.name) {
            Some(&fired) if fired >= tick => None,
            _ => Some(tick),
        }
    }

    /// `job` fired for `tick` (here or in another process).
    pub fn fired(&mut self, job: &PeriodicJob, tick: i64) {
        self.0.insert(job.name.clone(), tick);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::QueueName;
    use crate::worker::fakes::T0;

    const MIN: i64 = 60_000_000;
    const HOUR: i64 = 60 * MIN;

    fn every(secs: u64) -> Schedule {
        Schedule::Every(Duration::from_secs(secs))
    }

    #[test]
    fn an_interval_ticks_at_its_multiples_since_the_epoch() {
        let minutely = every(60);
        assert_eq!(minutely.last_tick(T0), Some(T0), "a tick is its own latest");
        assert_eq!(minutely.last_tick(T0 + MIN - 1), Some(T0));
        assert_eq!(minutely.last_tick(T0 + MIN), Some(T0 + MIN));
        assert_eq!(minutely.last_tick(-1), Some(-MIN), "before the epoch too");
        assert_eq!(
            every(0).last_tick(T0 + 7),
            Some(T0 + 7),
            "zero ticks every microsecond"
        );
    }

    #[test]
    fn a_cron_expression_ticks_at_the_times_it_names_in_utc() {
        // T0 is 2024-01-01T00:00:00Z, a Monday.
        let daily = Schedule::cron("0 3 * * *").unwrap();
        assert_eq!(daily.last_tick(T0 + 12 * HOUR), Some(T0 + 3 * HOUR));
        assert_eq!(daily.last_tick(T0 + 3 * HOUR), Some(T0 + 3 * HOUR));
        assert_eq!(daily.last_tick(T0 + 2 * HOUR), Some(T0 - 21 * HOUR));
        let weekdays = Schedule::cron("30 9 * * 1-5").unwrap();
        assert_eq!(
            weekdays.last_tick(T0 + 6 * 24 * HOUR),
            Some(T0 + 4 * 24 * HOUR + 9 * HOUR + 30 * MIN)
        );
        let seconds = Schedule::cron("15 * * * * *").unwrap();
        assert_eq!(seconds.last_tick(T0 + MIN), Some(T0 + 15_000_000));
    }

    #[test]
    fn a_cron_expression_that_does_not_read_is_refused() {
        for bad in ["", "0 3 * *", "61 * * * *", "every day"] {
            let e = Schedule::cron(bad).unwrap_err();
            assert!(
                matches!(
                    e,
                    Error::OptionInvalid {
                        what: "cron expression",
                        ..
                    }
                ),
                "{bad}: {e}"
            );
        }
    }

    #[test]
    fn a_tick_is_due_once_here_and_missed_ticks_are_not_made_up() {
        let job = NewJob::new(
            QueueName::new("q").unwrap(),
            crate::Payload::parse("{}", 10).unwrap(),
        );
        let p = PeriodicJob::new("sweep", every(60), job);
        let mut fired = Fired::default();
        assert_eq!(fired.due(&p, T0 + 5), Some(T0));
        fired.fired(&p, T0);
        assert_eq!(fired.due(&p, T0 + MIN - 1), None);
        assert_eq!(
            fired.due(&p, T0 + 10 * MIN + 1),
            Some(T0 + 10 * MIN),
            "the latest only"
        );
    }
}
