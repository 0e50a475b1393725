//! What every part of the benchmark shares: the progress display, medians and paired ratios,
//! the client's CPU clock, and the no-op workers whose drains are timed.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use backlog::{Client, JobContext, Outcome, Worker};
use indicatif::{ProgressBar, ProgressStyle};

pub(crate) fn progress() -> ProgressBar {
    let bar = ProgressBar::new(0);
    bar.set_style(
        ProgressStyle::with_template("{spinner} {msg:<38} {bar:30} {pos}/{len} ({per_sec})")
            .expect("template"),
    );
    bar.enable_steady_tick(Duration::from_millis(100));
    bar
}

pub(crate) fn phase(bar: &ProgressBar, msg: &str, len: u64) {
    bar.set_message(msg.to_owned());
    bar.set_length(len);
    bar.set_position(0);
    bar.reset_eta();
}

/// CPU time this process (every thread) spent since `start`: on a machine the database shares,
/// what the client spends per job is taken from the database.
pub(crate) struct CpuClock(Duration);

impl CpuClock {
    pub(crate) fn now() -> Duration {
        use nix::sys::resource::{UsageWho, getrusage};
        let tv = |t: nix::sys::time::TimeVal| {
            Duration::new(t.tv_sec().max(0) as u64, (t.tv_usec().max(0) as u32) * 1000)
        };
        getrusage(UsageWho::RUSAGE_SELF)
            .map(|u| tv(u.user_time()) + tv(u.system_time()))
            .unwrap_or_default()
    }

    pub(crate) fn start() -> Self {
        CpuClock(Self::now())
    }

    /// Microseconds of CPU per job, over `jobs` jobs.
    pub(crate) fn us_per(&self, jobs: u64) -> f64 {
        (Self::now() - self.0).as_secs_f64() * 1e6 / jobs.max(1) as f64
    }
}

/// Log bytes per job between two readings of the server's log position (NaN when there is none).
pub(crate) fn per_job(before: Option<i64>, after: Option<i64>, jobs: u64) -> f64 {
    match (before, after) {
        (Some(b), Some(a)) => (a - b) as f64 / jobs.max(1) as f64,
        _ => f64::NAN,
    }
}

/// The median over rounds of each round's ratio `a[i] / b[i]`: the two sides of a round ran
/// minutes apart at most, so their ratio holds when the machine's speed drifts between rounds.
pub(crate) fn paired(a: &[f64], b: &[f64]) -> f64 {
    let ratios: Vec<f64> = a.iter().zip(b).map(|(a, b)| a / b).collect();
    median(&ratios)
}

pub(crate) fn median(v: &[f64]) -> f64 {
    let mut v = v.to_vec();
    v.sort_by(f64::total_cmp);
    match v.len() {
        0 => f64::NAN, // not measured: null in --json
        n if n % 2 == 1 => v[n / 2],
        n => (v[n / 2 - 1] + v[n / 2]) / 2.0,
    }
}

/// A worker whose handler does nothing but count. The progress display follows the count ten
/// times a second, from a task of its own: the bare loops move it once a batch, and a display
/// update per job (a clock read and shared counters) would count against the runtime.
pub(crate) fn noop_worker(
    client: &Arc<Client>,
    queue: &str,
    concurrency: u64,
    done: Arc<AtomicU64>,
    bar: &ProgressBar,
) -> anyhow::Result<backlog::WorkerBuilder> {
    awaiting_worker(client, queue, concurrency, done, bar, Duration::ZERO)
}

/// [`noop_worker`] whose handler first awaits `wait`, as a handler waiting on I/O would, and
/// counts the job once it has (zero: no wait, the no-op handler).
pub(crate) fn awaiting_worker(
    client: &Arc<Client>,
    queue: &str,
    concurrency: u64,
    done: Arc<AtomicU64>,
    bar: &ProgressBar,
    wait: Duration,
) -> anyhow::Result<backlog::WorkerBuilder> {
    let (counted, bar) = (Arc::downgrade(&done), bar.clone());
    tokio::spawn(async move {
        let mut shown = 0;
        // Ends once the worker (its handler holds the count) and the caller are done with it.
        while let Some(done) = counted.upgrade() {
            let n = done.load(Ordering::Relaxed);
            bar.inc(n - shown);
            shown = n;
            drop(done);
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    });
    let builder = Worker::builder(client.clone()).queue(queue, concurrency as usize);
    let builder = match wait.is_zero() {
        true => builder.fallback_handler(move |_ctx: JobContext| {
            done.fetch_add(1, Ordering::Relaxed);
            async { Ok(Outcome::Complete) }
        }),
        false => builder.fallback_handler(move |_ctx: JobContext| {
            let done = done.clone();
            async move {
                tokio::time::sleep(wait).await;
                done.fetch_add(1, Ordering::Relaxed);
                Ok(Outcome::Complete)
            }
        }),
    };
    Ok(builder.configure(|c| c.maintenance = None))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ratios_pair_each_round() {
        // A machine that halves its speed between rounds: the rounds' own ratios hold.
        let ours = [90.0, 45.0, 44.0];
        let base = [100.0, 50.0, 40.0];
        assert!((paired(&ours, &base) - 0.9).abs() < 1e-9);
        assert!((median(&[3.0, 1.0, 2.0]) - 2.0).abs() < 1e-9);
        assert!((median(&[4.0, 1.0]) - 2.5).abs() < 1e-9);
        assert!(median(&[]).is_nan());
        assert!(paired(&[], &[]).is_nan());
    }
}
