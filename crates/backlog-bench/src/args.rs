//! The arguments of `backlog bench` (this binary, `backlog-bench`, which `backlog bench` runs).

use std::time::Duration;

use clap::{Args, Parser, Subcommand};
use serde::Serialize;

/// Measures enqueue rates, end-to-end throughput and latency against bare SQL on the same
/// database, or (with one of --soak, --overload, --processes, --flow, --grow) one long run.
#[derive(Debug, Parser)]
#[command(
    name = "backlog bench",
    bin_name = "backlog bench",
    version,
    about,
    args_conflicts_with_subcommands = true
)]
pub struct Cli {
    /// Database URL: sqlite://PATH, postgres://…, mysql://… (MySQL and MariaDB).
    #[arg(
        long,
        global = true,
        env = "BACKLOG_DATABASE_URL",
        default_value = "sqlite://backlog.db"
    )]
    pub database_url: String,
    #[command(subcommand)]
    pub process: Option<Process>,
    #[command(flatten)]
    pub bench: BenchArgs,
}

/// The one hidden subcommand.
#[derive(Debug, Subcommand)]
pub enum Process {
    /// One worker process of `--processes` (started by it): says `ready`, waits for a line on
    /// stdin, drains QUEUE with a no-op handler, prints `done N`.
    #[command(hide = true)]
    Process(ProcessArgs),
}

/// The arguments of one worker process of `--processes`.
#[derive(Debug, Args)]
pub struct ProcessArgs {
    pub queue: String,
    #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(u64).range(1..=10_000))]
    pub concurrency: u64,
    #[arg(long, default_value_t = 2, value_parser = clap::value_parser!(u32).range(1..=1_000))]
    pub connections: u32,
    #[arg(long, default_value_t = 0, value_parser = clap::value_parser!(u64).range(0..=60_000))]
    pub handler_ms: u64,
}

/// What the session of `--hold-transaction` holds open.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, clap::ValueEnum)]
#[serde(rename_all = "kebab-case")]
pub enum HoldKind {
    /// A read in `REPEATABLE READ` (MySQL/MariaDB: `START TRANSACTION WITH CONSISTENT
    /// SNAPSHOT`), as a report or `pg_dump` holds one.
    Snapshot,
    /// A row written to a (temporary) table of its own, then idle in transaction: a
    /// transaction id, which holds PostgreSQL's horizon as a snapshot does (InnoDB's purge
    /// waits only on read views, which such a transaction does not open).
    Write,
}

/// A part of the benchmark, for `--only`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum Phase {
    /// Single and batched enqueue, each beside its bare INSERTs.
    Enqueue,
    /// The drain of pre-queued jobs, beside the bare claim-and-complete loops.
    Drain,
    /// A steady producer while the runtime works.
    Steady,
    /// Enqueue-to-start latency.
    Latency,
    /// The seed S2 replay.
    S2,
    /// The HTTP API (`backlog serve`) beside the library: batched enqueue, claim and complete,
    /// and job show while a drain runs.
    Http,
}

#[derive(Debug, Args)]
pub struct BenchArgs {
    /// Jobs enqueued in batches and then drained (default 100000; 5000 with --quick).
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..=100_000_000))]
    pub jobs: Option<u64>,
    /// Jobs enqueued one at a time, across the producers (default 10000; 800 with --quick).
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..=10_000_000))]
    pub single_jobs: Option<u64>,
    /// Concurrent producers of single enqueues.
    #[arg(long, default_value_t = 16, value_parser = clap::value_parser!(u64).range(1..=256))]
    pub producers: u64,
    /// Jobs per batched enqueue.
    #[arg(long, default_value_t = 1000, value_parser = clap::value_parser!(u64).range(1..=10_000))]
    pub batch: u64,
    /// Worker concurrency (jobs in flight) for the drain and steady phases.
    #[arg(long, default_value_t = 100, value_parser = clap::value_parser!(u64).range(1..=10_000))]
    pub concurrency: u64,
    /// Concurrent claim-and-complete loops of the bare-SQL drain (each claims concurrency/loops).
    /// Default: the two-statement form runs 2 loops, and the one-statement form (the baseline of
    /// the drain ratio) is run with 2, 4 and 8 loops, as long as each claims at least 50 jobs, and
    /// the fastest counts; on SQLite, whose one writer runs one claim at a time, 1 loop claiming
    /// the whole concurrency (its fastest bare form).
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..=64))]
    pub baseline_loops: Option<u64>,
    /// Claim loops of the runtime's drain (the library's `WorkerConfig::fetchers`; default: its
    /// own choice for the concurrency and the backend).
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..=64))]
    pub fetchers: Option<u64>,
    /// Most jobs per claim in the runtime's drain (`WorkerConfig::claim_batch`; default: its
    /// own choice).
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..=10_000))]
    pub claim_batch: Option<u64>,
    /// The runtime's drain claims under a lease only (`WorkerConfig::claim_in_transaction` off),
    /// to set its transaction claims beside it.
    #[arg(long)]
    pub lease_claims: bool,
    /// Shards of the benchmark's queues (`queue set --shards`); the bare SQL spreads its rows
    /// and claims over as many (PostgreSQL, MySQL and MariaDB; SQLite keeps one head).
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u16).range(1..=256))]
    pub shards: u16,
    /// How long the steady producer runs (default 10s; 1s with --quick).
    #[arg(long, value_parser = parse_duration)]
    pub steady: Option<Duration>,
    /// Jobs of the latency phase (default 2000; 100 with --quick).
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..=1_000_000))]
    pub latency_jobs: Option<u64>,
    /// Jobs per second of the latency phase.
    #[arg(long, default_value_t = 200, value_parser = clap::value_parser!(u64).range(1..=100_000))]
    pub latency_rate: u64,
    /// Rounds of the enqueue and drain phases, each running bare SQL and backlog (the drains in
    /// turn first); rates are medians over the rounds, ratios the median of each round's ratio
    /// (default 5; 1 with --quick; 3 with --grow).
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..=100))]
    pub rounds: Option<u64>,
    /// Jobs of the S2 replay (default 5000; 200 with --quick).
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..=10_000_000))]
    pub s2_jobs: Option<u64>,
    /// Jobs the S2 replay runs at once (default 500; 100 with --quick).
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..=10_000))]
    pub s2_concurrency: Option<u64>,
    /// How long each S2 job takes, a sleep (default 1s; 100ms with --quick).
    #[arg(long, value_parser = parse_duration)]
    pub s2_sleep: Option<Duration>,
    /// Instead of the figures above: cost as work grows. Drain throughput with each of
    /// --grow-levels jobs queued, and the hot table's size before and after a long steady run
    /// with pruning.
    #[arg(long)]
    pub grow: bool,
    /// Queue depths of --grow, comma-separated (default 10000,1000000; 10000,50000 with --quick).
    #[arg(long, value_delimiter = ',', value_parser = clap::value_parser!(u64).range(1..=100_000_000))]
    pub grow_levels: Option<Vec<u64>>,
    /// Jobs drained at each depth of --grow, per round (default 20000; 2000 with --quick).
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..=10_000_000))]
    pub grow_drain: Option<u64>,
    /// How long the steady run of --grow lasts (default 60s; 2s with --quick).
    #[arg(long, value_parser = parse_duration)]
    pub grow_run: Option<Duration>,
    /// Jobs per second of the steady run of --grow (below what the worker can do).
    #[arg(long, default_value_t = 2000, value_parser = clap::value_parser!(u64).range(1..=1_000_000))]
    pub grow_rate: u64,
    /// Instead of the figures above: what flow control costs. --jobs jobs drained plain and
    /// spread over --flow-groups ordered groups (rounds alternating), then --flow-limit-jobs jobs
    /// of --s2-sleep each under a global limit of --flow-limit, worked by two workers of
    /// --s2-concurrency slots each, the running jobs sampled every 50 ms.
    #[arg(long, conflicts_with_all = ["grow", "overload", "soak"])]
    pub flow: bool,
    /// Ordered groups of --flow's grouped drain (default 10000; 500 with --quick).
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..=10_000_000))]
    pub flow_groups: Option<u64>,
    /// The global limit of --flow (default 50).
    #[arg(long, default_value_t = 50, value_parser = clap::value_parser!(u64).range(1..=100_000))]
    pub flow_limit: u64,
    /// Jobs of --flow's global-limit part (default 500; 100 with --quick).
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..=10_000_000))]
    pub flow_limit_jobs: Option<u64>,
    /// Instead of the figures above: one queue of --jobs jobs (default 100,000; 2,000 with
    /// --quick) drained by this many worker processes at once, each with its own pool, for each
    /// count given (such as 1,4,16,64): the rate, the server's connections, and a check that no
    /// job ran twice.
    #[arg(long, value_delimiter = ',', value_parser = clap::value_parser!(u64).range(1..=512),
          conflicts_with_all = ["grow", "overload", "soak", "flow"])]
    pub processes: Option<Vec<u64>>,
    /// Jobs each process of --processes runs at once.
    #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(u64).range(1..=10_000))]
    pub process_concurrency: u64,
    /// Most connections each process of --processes opens (a PostgreSQL server allows 100 by
    /// default, over every client).
    #[arg(long, default_value_t = 2, value_parser = clap::value_parser!(u32).range(1..=1_000))]
    pub process_connections: u32,
    /// Bytes of padding in each job's payload for --processes (such as 1024; default none).
    #[arg(long, default_value_t = 0, requires = "processes",
          value_parser = clap::value_parser!(u64).range(0..=1_048_576))]
    pub payload_bytes: u64,
    /// Milliseconds each handler of --processes awaits before it completes its job, as a
    /// handler waiting on I/O would (default 0: a no-op).
    #[arg(long, default_value_t = 0, requires = "processes",
          value_parser = clap::value_parser!(u64).range(0..=60_000))]
    pub handler_ms: u64,
    /// Instead of the figures above: a soak this long (such as 1h). A steady producer at
    /// --soak-rate and a worker whose leader prunes completed jobs, sampled every --soak-window:
    /// memory, connections, the job table's bytes and p99 latency, with a verdict on whether each
    /// stays flat after --soak-settle.
    #[arg(long, value_parser = positive_duration, conflicts_with_all = ["grow", "overload"])]
    pub soak: Option<Duration>,
    /// Jobs per second of --soak.
    #[arg(long, default_value_t = 2000, value_parser = clap::value_parser!(u64).range(1..=1_000_000))]
    pub soak_rate: u64,
    /// How long each sampled window of --soak or --overload lasts (default 60s for --soak, 10s
    /// for --overload).
    #[arg(long, value_parser = positive_duration)]
    pub soak_window: Option<Duration>,
    /// The first part of --soak, left out of the verdict (default a sixth of the soak, at most
    /// 10m).
    #[arg(long, value_parser = parse_duration)]
    pub soak_settle: Option<Duration>,
    /// How long --soak keeps completed jobs before its leader prunes them.
    #[arg(long, default_value = "60s", value_parser = parse_duration)]
    pub soak_keep: Duration,
    /// During --soak, another session holds a transaction open throughout: what a session left
    /// idle in transaction costs (PostgreSQL's xmin horizon, InnoDB's purge, SQLite's WAL).
    #[arg(long, requires = "soak")]
    pub hold_transaction: bool,
    /// What --hold-transaction's session does (default snapshot).
    #[arg(long, value_enum, requires = "hold_transaction")]
    pub hold_kind: Option<HoldKind>,
    /// The server --hold-transaction's session runs on (default the database under test): a
    /// PostgreSQL physical replica with `hot_standby_feedback = on` holds the primary's horizon
    /// for a query it runs as a session on the primary would.
    #[arg(long, requires = "hold_transaction", value_name = "URL")]
    pub hold_url: Option<String>,
    /// Instead of the figures above: this many jobs enqueued as fast as --overload-producers
    /// can (more callers than the pool's 16 connections) while a worker drains them; samples
    /// memory, the pool and the jobs waiting.
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..=100_000_000), conflicts_with = "grow")]
    pub overload: Option<u64>,
    /// Concurrent producers of --overload.
    #[arg(long, default_value_t = 64, value_parser = clap::value_parser!(u64).range(1..=4096))]
    pub overload_producers: u64,
    /// Only these phases, comma-separated (default all); the figures of the others are null in
    /// --json. The drain phase queues its jobs untimed when enqueue is left out.
    #[arg(long, value_delimiter = ',', value_enum)]
    pub only: Option<Vec<Phase>>,
    /// A few-second run (for CI: it keeps the benchmark working, not a measurement).
    #[arg(long)]
    pub quick: bool,
    /// Print the figures as JSON.
    #[arg(long)]
    pub json: bool,
}

fn parse_duration(s: &str) -> Result<Duration, String> {
    backlog::parse_duration(s).map_err(|e| e.to_string())
}

fn positive_duration(s: &str) -> Result<Duration, String> {
    match parse_duration(s)? {
        d if d.is_zero() => Err("must be longer than zero".into()),
        d => Ok(d),
    }
}
