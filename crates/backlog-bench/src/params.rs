//! What a run measures, and with what: the settings of each mode, from the arguments and the
//! `--quick` defaults.

use std::time::Duration;

use serde::Serialize;

use crate::args::{BenchArgs, Phase};
use crate::{grow, soak};

/// What one run measures, and with what.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct Params {
    pub backend: String,
    pub single_jobs: u64,
    pub producers: u64,
    pub batch_jobs: u64,
    pub batch_size: u64,
    pub concurrency: u64,
    /// Loops of the two-statement bare drain.
    pub baseline_loops: u64,
    /// The loop counts the one-statement bare drain is run with in each round; the fastest is
    /// the baseline (the best bare SQL at the same concurrency).
    pub fold_loops: Vec<u64>,
    /// The runtime's claim loops and claim size, when set (`--fetchers`, `--claim-batch`).
    pub fetchers: Option<u64>,
    pub claim_batch: Option<u64>,
    /// The runtime's drain claims under a lease only (`--lease-claims`).
    pub lease_claims: bool,
    pub shards: u16,
    pub steady_secs: f64,
    pub latency_jobs: u64,
    pub latency_rate_per_s: u64,
    pub rounds: u64,
    /// The phases run.
    pub phases: Vec<Phase>,
    pub s2_jobs: u64,
    pub s2_concurrency: u64,
    pub s2_sleep_ms: u64,
}

/// The loop counts the one-statement bare drain tries at `concurrency`: on SQLite one (its one
/// writer runs one claim at a time, so one claim of the whole concurrency is its fastest form);
/// elsewhere 2, and 4 and 8 as long as each loop still claims at least [`MIN_FOLD_CLAIM`] jobs.
/// The fastest is the baseline: at concurrency 500 on PostgreSQL four loops of 125 drained
/// 76,000–93,000 jobs/s where two of 250 drained 60,000–66,000
/// (docs/bench-journal/2026-11-27-best-bare-form-claims-that-waited.md).
fn fold_loops(backend: &str, concurrency: u64) -> Vec<u64> {
    if backend == "sqlite" {
        return vec![1];
    }
    let mut loops = vec![2];
    loops.extend(
        [4, 8]
            .into_iter()
            .filter(|n| concurrency / n >= MIN_FOLD_CLAIM),
    );
    loops
}

/// The smallest claim a loop of the one-statement bare drain is tried with (see [`fold_loops`]).
const MIN_FOLD_CLAIM: u64 = 50;

pub(crate) fn params(url: &str, a: &BenchArgs) -> Params {
    let backend = url.split(':').next().unwrap_or("").to_owned();
    let baseline_loops = a
        .baseline_loops
        .unwrap_or(if backend == "sqlite" { 1 } else { 2 });
    let fold_loops = match a.baseline_loops {
        Some(n) => vec![n],
        None => fold_loops(&backend, a.concurrency),
    };
    let q = a.quick;
    Params {
        backend,
        single_jobs: a.single_jobs.unwrap_or(if q { 800 } else { 10_000 }),
        producers: a.producers,
        batch_jobs: a.jobs.unwrap_or(if q { 5_000 } else { 100_000 }),
        batch_size: a.batch,
        concurrency: a.concurrency,
        baseline_loops,
        fold_loops,
        fetchers: a.fetchers,
        claim_batch: a.claim_batch,
        lease_claims: a.lease_claims,
        shards: a.shards,
        steady_secs: a
            .steady
            .unwrap_or(if q {
                Duration::from_secs(1)
            } else {
                Duration::from_secs(10)
            })
            .as_secs_f64(),
        latency_jobs: a.latency_jobs.unwrap_or(if q { 100 } else { 2_000 }),
        latency_rate_per_s: a.latency_rate,
        rounds: a.rounds.unwrap_or(if q { 1 } else { 5 }),
        phases: a
            .only
            .clone()
            .unwrap_or_else(|| <Phase as clap::ValueEnum>::value_variants().to_vec()),
        s2_jobs: a.s2_jobs.unwrap_or(if q { 200 } else { 5_000 }),
        s2_concurrency: a.s2_concurrency.unwrap_or(if q { 100 } else { 500 }),
        s2_sleep_ms: a
            .s2_sleep
            .unwrap_or(Duration::from_millis(if q { 100 } else { 1000 }))
            .as_millis() as u64,
    }
}

/// Refuses a held session the database under test cannot have, before anything is connected:
/// `--hold-url` on another kind of server than `url`'s (or with SQLite, which has no other
/// server), and a session that writes on SQLite (its one writer would stop the queue).
pub(crate) fn check_hold(url: &str, a: &BenchArgs) -> anyhow::Result<()> {
    let kind = |u: &str| match u.split(':').next().unwrap_or("") {
        "postgres" | "postgresql" => "postgres",
        "mysql" | "mariadb" => "mysql",
        "sqlite" => "sqlite",
        _ => "",
    };
    let under_test = kind(url);
    if let Some(h) = &a.hold_url {
        anyhow::ensure!(
            under_test != "sqlite",
            "--hold-url: SQLite has no other server to hold a session on"
        );
        anyhow::ensure!(
            kind(h) == under_test,
            "--hold-url {h:?}: expected a {under_test}:// URL, a server of the kind under test"
        );
    }
    anyhow::ensure!(
        !(under_test == "sqlite" && a.hold_kind == Some(crate::args::HoldKind::Write)),
        "--hold-kind write: SQLite has one writer at a time, so the held session would stop the \
         queue, not slow it"
    );
    Ok(())
}

pub(crate) fn soak_params(p: &Params, a: &BenchArgs, length: Duration) -> soak::SoakParams {
    let window = a.soak_window.unwrap_or(if a.quick {
        Duration::from_secs(1)
    } else {
        Duration::from_secs(60)
    });
    let settle = a
        .soak_settle
        .unwrap_or((length / 6).min(Duration::from_secs(600)));
    soak::SoakParams {
        backend: p.backend.clone(),
        secs: length.as_secs_f64(),
        rate: a.soak_rate,
        window_secs: window.as_secs_f64(),
        settle_secs: settle.as_secs_f64(),
        keep_completed_secs: a.soak_keep.as_secs_f64(),
        concurrency: p.concurrency,
        hold_transaction: a.hold_transaction,
        hold_kind: a
            .hold_transaction
            .then(|| a.hold_kind.unwrap_or(crate::args::HoldKind::Snapshot)),
        hold_elsewhere: a.hold_url.is_some(),
        hold_url: a.hold_url.clone(),
    }
}

pub(crate) fn grow_params(p: &Params, a: &BenchArgs) -> grow::GrowParams {
    let q = a.quick;
    grow::GrowParams {
        backend: p.backend.clone(),
        levels: a.grow_levels.clone().unwrap_or(if q {
            vec![2_000, 20_000]
        } else {
            vec![10_000, 1_000_000]
        }),
        drain_jobs: a.grow_drain.unwrap_or(if q { 1_000 } else { 10_000 }),
        rounds: a.rounds.unwrap_or(if q { 1 } else { 3 }),
        concurrency: p.concurrency,
        run_secs: a
            .grow_run
            .unwrap_or(Duration::from_secs(if q { 2 } else { 60 }))
            .as_secs_f64(),
        run_rate: a.grow_rate,
        keep_completed_ms: if q { 500 } else { 5_000 },
        shards: p.shards,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_bare_drain_tries_more_loops_while_each_claims_enough() {
        assert_eq!(fold_loops("sqlite", 500), vec![1]);
        assert_eq!(fold_loops("postgres", 100), vec![2]);
        assert_eq!(fold_loops("postgres", 200), vec![2, 4]);
        assert_eq!(fold_loops("mysql", 399), vec![2, 4]);
        assert_eq!(fold_loops("postgres", 400), vec![2, 4, 8]);
        assert_eq!(fold_loops("postgres", 1), vec![2]);
    }
}
