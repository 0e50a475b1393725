//! Arguments, exactly as PRODUCT.md's command table says, and dispatch.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use backlog::{Client, Kind, QueueName, SqlBackend, StateFilter};
use clap::{Args, Parser, Subcommand};

use crate::{admin, bench, demo, enqueue, serve, work};

/// Durable job queues in the SQL database you already run.
#[derive(Debug, Parser)]
#[command(name = "backlog", version, about)]
pub struct Cli {
    /// Database URL: sqlite://PATH, postgres://…, mysql://… (MySQL and MariaDB).
    #[arg(
        long,
        global = true,
        env = "BACKLOG_DATABASE_URL",
        default_value = "sqlite://backlog.db"
    )]
    pub database_url: String,
    /// Largest accepted payload in bytes.
    #[arg(long, global = true, env = "BACKLOG_PAYLOAD_LIMIT", default_value_t = backlog::DEFAULT_PAYLOAD_LIMIT as u64,
          value_parser = clap::value_parser!(u64).range(1..=64 * 1024 * 1024))]
    pub payload_limit: u64,
    /// Most connections this process opens to the database (its pool; on PostgreSQL one of
    /// them LISTENs for new jobs when there are at least 2). Many worker processes on one
    /// server: their sum must stay under the server's limit (PostgreSQL: 100 by default).
    #[arg(long, global = true, env = "BACKLOG_MAX_CONNECTIONS", default_value_t = 16,
          value_parser = clap::value_parser!(u32).range(1..=1_000))]
    pub max_connections: u32,
    /// Export spans (a job's handler, an API request) to this OpenTelemetry collector, over
    /// OTLP/HTTP with protobuf: the base URL, `/v1/traces` is added (e.g. http://localhost:4318).
    #[arg(
        long,
        global = true,
        env = "OTEL_EXPORTER_OTLP_ENDPOINT",
        value_name = "URL"
    )]
    pub otlp_endpoint: Option<String>,
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Creates or upgrades the schema (idempotent; safe from several processes at once).
    Migrate,
    /// Enqueues one job (prints its id), or one per line of a JSONL file (prints the count).
    Enqueue(EnqueueArgs),
    /// Runs CMD once per job: payload on stdin; exit 0 completes the job, anything else fails it.
    Work(WorkArgs),
    /// Job counts per queue and state.
    Stats {
        /// Only this queue.
        queue: Option<String>,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Inspect and operate on jobs.
    #[command(subcommand)]
    Job(JobCommand),
    /// The dead-letter view.
    #[command(subcommand)]
    Dead(DeadCommand),
    /// Queue administration.
    #[command(subcommand)]
    Queue(QueueCommand),
    /// Measures enqueue rates, end-to-end throughput and latency against bare SQL on the same database.
    Bench(Box<BenchArgs>),
    /// Serves the HTTP API, Prometheus /metrics and health checks.
    Serve(ServeArgs),
    /// One worker process of `bench --processes` (started by it): says `ready`, waits for a
    /// line on stdin, drains QUEUE with a no-op handler, prints `done N`.
    #[command(hide = true)]
    BenchProcess {
        queue: String,
        #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(u64).range(1..=10_000))]
        concurrency: u64,
        #[arg(long, default_value_t = 2, value_parser = clap::value_parser!(u32).range(1..=1_000))]
        connections: u32,
        #[arg(long, default_value_t = 0, value_parser = clap::value_parser!(u64).range(0..=60_000))]
        handler_ms: u64,
    },
    /// The audit log: operators' actions (retry, cancel, hold, release, redrive, pause, resume,
    /// settings), newest first, with who and when.
    Audit {
        /// Only this queue's.
        #[arg(long)]
        queue: Option<String>,
        /// At most this many.
        #[arg(long, default_value_t = 50, value_parser = clap::value_parser!(u32).range(1..=10_000))]
        limit: u32,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Bearer tokens for `serve`.
    #[command(subcommand)]
    Token(TokenCommand),
    /// Runs the main job end to end on the database (SQLite by default) and shows what happened.
    Demo {
        /// Jobs to run.
        #[arg(long, default_value_t = 40, value_parser = clap::value_parser!(u32).range(1..=100_000))]
        jobs: u32,
    },
}

#[derive(Debug, Args)]
pub struct ServeArgs {
    /// Address to listen on: `IP:PORT`, or `localhost:PORT`. Without tokens only loopback is
    /// allowed.
    #[arg(long, default_value = "127.0.0.1:8080", value_parser = parse_listen)]
    pub listen: std::net::SocketAddr,
    /// A host name to answer besides those the listen address stands for (`localhost` on
    /// loopback): the name a reverse proxy forwards. Repeat for several. Requests naming any
    /// other host are refused (421), which keeps DNS-rebinding pages out.
    #[arg(long = "allow-host", value_name = "NAME", value_parser = parse_host_name)]
    pub allow_hosts: Vec<String>,
    /// A file of tokens, one per line: `NAME SCOPE SECRET` (SECRET may be `sha256:HEX`; see
    /// `backlog token new`). SCOPE is read, produce or admin.
    #[arg(long)]
    pub tokens: Option<PathBuf>,
    /// Tokens in the same form, separated by commas or newlines (added to --tokens).
    #[arg(
        long = "tokens-inline",
        env = "BACKLOG_API_TOKENS",
        hide_env_values = true
    )]
    pub tokens_env: Option<String>,
    /// Largest request body in bytes.
    #[arg(long, default_value_t = 32 * 1024 * 1024, value_parser = clap::value_parser!(u64).range(1024..=1024 * 1024 * 1024))]
    pub body_limit: u64,
}

/// `IP:PORT`, or `localhost:PORT` (IPv4 loopback). Other names are refused: the address a
/// name resolves to can change under a running server.
fn parse_listen(text: &str) -> Result<std::net::SocketAddr, String> {
    if let Ok(addr) = text.parse() {
        return Ok(addr);
    }
    match text.rsplit_once(':') {
        Some((host, port)) if host.eq_ignore_ascii_case("localhost") => port
            .parse::<u16>()
            .map(|port| std::net::SocketAddr::from(([127, 0, 0, 1], port)))
            .map_err(|_| format!("{port:?} is not a port number (0 to 65535)")),
        _ => Err(format!(
            "{text:?} is not an address to listen on: give IP:PORT (127.0.0.1:8080, \
             [::1]:8080, 0.0.0.0:8080) or localhost:PORT"
        )),
    }
}

/// A DNS name or address literal, without a port.
fn parse_host_name(text: &str) -> Result<String, String> {
    let name = text.trim().trim_end_matches('.');
    let literal = name.starts_with('[') && name.ends_with(']');
    let plain = !name.is_empty()
        && name.len() <= 253
        && name.split('.').all(|l| {
            !l.is_empty()
                && l.len() <= 63
                && l.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-')
        });
    if literal || plain {
        Ok(name.to_ascii_lowercase())
    } else {
        Err(format!(
            "{text:?} is not a host name: give a DNS name (queue.example.com) or an address, \
             without a scheme or port"
        ))
    }
}

#[derive(Debug, Subcommand)]
pub enum TokenCommand {
    /// Makes a token: prints the line for the tokens file (holding only the secret's SHA-256)
    /// and the secret to give the client.
    New {
        /// The token's name, recorded as who did what.
        name: String,
        /// read, produce or admin.
        #[arg(long)]
        scope: String,
    },
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
    pub only: Option<Vec<bench::Phase>>,
    /// A few-second run (for CI: it keeps the benchmark working, not a measurement).
    #[arg(long)]
    pub quick: bool,
    /// Print the figures as JSON.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct EnqueueArgs {
    /// Queue name (letters, digits, _ - . :).
    pub queue: String,
    /// JSON payload, or - to read it from stdin.
    pub payload: Option<String>,
    /// Enqueue one job per line of FILE (- for stdin).
    #[arg(long, value_name = "FILE", conflicts_with = "payload")]
    pub jsonl: Option<PathBuf>,
    /// Lower runs first.
    #[arg(long, default_value_t = 0, allow_negative_numbers = true)]
    pub priority: i16,
    /// Run no earlier than this long from now (e.g. 30s, 5m).
    #[arg(long, value_parser = parse_duration)]
    pub delay: Option<Duration>,
    /// Attempts before the job is dead (default: the queue's setting).
    #[arg(long, value_parser = clap::value_parser!(i32).range(1..=10_000))]
    pub max_attempts: Option<i32>,
    /// While a job with this key is unfinished, return its id and create nothing.
    #[arg(long, conflicts_with = "jsonl")]
    pub unique_key: Option<String>,
    /// The ordered group (a customer, an account …): jobs of the queue with the same group run
    /// in enqueue order, at most the queue's group concurrency at a time.
    #[arg(long)]
    pub group: Option<String>,
    /// Job kind (for typed handlers and filters).
    #[arg(long)]
    pub kind: Option<String>,
    /// The W3C trace context to carry to the job's handler, so its span continues this trace.
    #[arg(long, env = "TRACEPARENT", value_name = "TRACEPARENT")]
    pub traceparent: Option<String>,
    /// The W3C `tracestate` that goes with --traceparent.
    #[arg(
        long,
        env = "TRACESTATE",
        requires = "traceparent",
        value_name = "TRACESTATE"
    )]
    pub tracestate: Option<String>,
}

#[derive(Debug, Args)]
pub struct WorkArgs {
    /// Queues to work.
    #[arg(required = true, num_args = 1..)]
    pub queues: Vec<String>,
    /// The command to run per job, after `--`.
    #[arg(last = true, required = true, num_args = 1..)]
    pub cmd: Vec<String>,
    /// Jobs run at once.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=1000))]
    pub concurrency: u32,
    /// Lease length (default: the queue's); heartbeats renew it while the command runs.
    #[arg(long, value_parser = parse_duration)]
    pub lease: Option<Duration>,
    /// Kill the command and fail the job after this long.
    #[arg(long, value_parser = parse_duration)]
    pub timeout: Option<Duration>,
    /// Exit 0 once no job this worker may take (of these queues, and of --kind's kinds) is
    /// available, scheduled, running or waiting to retry. A paused queue's jobs are left for
    /// after the resume: the drain ends with a warning.
    #[arg(long)]
    pub drain: bool,
    /// Only jobs of these kinds.
    #[arg(long = "kind")]
    pub kinds: Vec<String>,
    /// Longest wait between polls when the queues are empty.
    #[arg(long, default_value = "1s", value_parser = parse_duration)]
    pub poll: Duration,
    /// On SIGINT/SIGTERM, how long running jobs may finish before they are stopped and released.
    #[arg(long, default_value = "30s", value_parser = parse_duration)]
    pub grace: Duration,
    /// Serve this process's own Prometheus metrics at http://ADDR/metrics (its running jobs per
    /// queue, claim durations, outcomes).
    #[arg(long, value_name = "ADDR")]
    pub metrics: Option<std::net::SocketAddr>,
}

#[derive(Debug, Subcommand)]
pub enum JobCommand {
    /// One job with its error history.
    Show {
        /// Job id.
        id: i64,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Jobs of a queue.
    List {
        /// Queue name.
        queue: String,
        /// available, scheduled, retrying, running, completed, dead, cancelled, held or waiting.
        #[arg(long)]
        state: Option<String>,
        /// At most this many.
        #[arg(long, default_value_t = 100, value_parser = clap::value_parser!(u32).range(1..=100_000))]
        limit: u32,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Runs a dead, cancelled or completed job again (attempts reset).
    Retry {
        /// Job id.
        id: i64,
    },
    /// Cancels a job that is not running.
    Cancel {
        /// Job id.
        id: i64,
    },
    /// Holds an available job back until released.
    Hold {
        /// Job id.
        id: i64,
    },
    /// Releases a held job.
    Release {
        /// Job id.
        id: i64,
    },
}

#[derive(Debug, Subcommand)]
pub enum DeadCommand {
    /// A queue's dead jobs.
    List {
        /// Queue name.
        queue: String,
        /// At most this many.
        #[arg(long, default_value_t = 100, value_parser = clap::value_parser!(u32).range(1..=100_000))]
        limit: u32,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Moves dead jobs back to available.
    Redrive {
        /// Queue name.
        queue: String,
        /// At most this many.
        #[arg(long, default_value_t = 1000, value_parser = clap::value_parser!(u32).range(1..=1_000_000))]
        limit: u32,
    },
}

#[derive(Debug, Subcommand)]
pub enum QueueCommand {
    /// Every known queue.
    List {
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Stops handing out the queue's jobs.
    Pause {
        /// Queue name.
        queue: String,
    },
    /// Hands out the queue's jobs again.
    Resume {
        /// Queue name.
        queue: String,
    },
    /// Changes settings (the queue is created if new).
    Set(Box<QueueSetArgs>),
    /// Prints a queue's settings.
    Show {
        /// Queue name.
        queue: String,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
}

#[derive(Debug, Args)]
pub struct QueueSetArgs {
    /// Queue name.
    pub queue: String,
    /// Attempts before a job is dead.
    #[arg(long, value_parser = clap::value_parser!(i32).range(1..=10_000))]
    pub max_attempts: Option<i32>,
    /// First retry delay.
    #[arg(long, value_parser = parse_duration)]
    pub backoff_base: Option<Duration>,
    /// Longest retry delay.
    #[arg(long, value_parser = parse_duration)]
    pub backoff_max: Option<Duration>,
    /// Lease length.
    #[arg(long, value_parser = parse_duration)]
    pub lease: Option<Duration>,
    /// fifo or lifo among equal priorities.
    #[arg(long)]
    pub order: Option<String>,
    /// What completion does: delete, keep or archive.
    #[arg(long)]
    pub retention: Option<String>,
    /// Jobs of this queue running at once per worker process.
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..=10_000))]
    pub concurrency: Option<u32>,
    /// Jobs of this queue running at once across every process and machine (1 to 1000000), or
    /// `none` to lift the limit.
    #[arg(long, value_parser = parse_global_limit, value_name = "N|none")]
    pub global_concurrency: Option<GlobalLimit>,
    /// Jobs of one ordered group available or running at once (1: one at a time).
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..=10_000))]
    pub group_concurrency: Option<u32>,
    /// What a failing job does to its group while it waits to retry: `block` (the group waits
    /// until it succeeds or is dead) or `next` (the group goes on; it runs again in its turn).
    #[arg(long, value_name = "block|next")]
    pub group_on_failure: Option<String>,
    /// At most N job starts per period in the queue over every process, e.g. `100/1m`, `5/1s`;
    /// `none` lifts the limit.
    #[arg(long, value_parser = parse_rate_limit, value_name = "N/PERIOD|none")]
    pub rate_limit: Option<RateLimitArg>,
    /// At most N job starts per period in each ordered group of the queue, over every process,
    /// e.g. `10/1m`; `none` lifts the limit. A job whose turn comes beyond its group's limit
    /// waits, available, until the limit lets it start.
    #[arg(long, value_parser = parse_rate_limit, value_name = "N/PERIOD|none")]
    pub group_rate_limit: Option<RateLimitArg>,
    /// Claim heads the queue's jobs are spread over (1 to 256). 1 keeps one strict order
    /// (priority, then due time, then enqueue order); more let many workers claim side by side
    /// on PostgreSQL and MySQL, with the order kept within each shard only. Safe on a live
    /// queue: jobs on shards a lower count drops move to the ones left.
    #[arg(long, value_parser = clap::value_parser!(u16).range(1..=256))]
    pub shards: Option<u16>,
}

/// `--rate-limit`, `--group-rate-limit`: a limit, or none.
#[derive(Debug, Clone, Copy)]
pub struct RateLimitArg(pub Option<backlog::RateLimit>);

fn parse_rate_limit(s: &str) -> Result<RateLimitArg, String> {
    match s {
        "none" => Ok(RateLimitArg(None)),
        _ => backlog::RateLimit::parse(s)
            .map(|r| RateLimitArg(Some(r)))
            .map_err(|e| e.to_string()),
    }
}

/// `--global-concurrency`: a limit, or none.
#[derive(Debug, Clone, Copy)]
pub struct GlobalLimit(pub Option<u32>);

fn parse_global_limit(s: &str) -> Result<GlobalLimit, String> {
    if s == "none" {
        return Ok(GlobalLimit(None));
    }
    match s.parse::<u32>() {
        Ok(n) if (1..=1_000_000).contains(&n) => Ok(GlobalLimit(Some(n))),
        _ => Err(format!(
            "expected a number from 1 to 1000000, or none; got {s:?}"
        )),
    }
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

/// A validated queue name, with the library's message on error.
pub fn queue_name(s: &str) -> anyhow::Result<QueueName> {
    Ok(QueueName::new(s)?)
}

/// Validated kinds.
pub fn kinds(v: &[String]) -> anyhow::Result<Vec<Kind>> {
    v.iter().map(|k| Ok(Kind::new(k.as_str())?)).collect()
}

/// The embedded SQLite database is the command's own file: its schema is created (or upgraded)
/// on first use rather than after an error telling the user to run `backlog migrate`. A server
/// database's schema belongs to whoever runs it, so PostgreSQL and MySQL keep requiring an
/// explicit `backlog migrate` (and say so).
async fn migrate_embedded(client: &Client, url: &str) -> anyhow::Result<()> {
    if !matches!(client.sql(), Some(SqlBackend::Sqlite(_))) {
        return Ok(());
    }
    let r = client.migrate().await?;
    if !r.applied.is_empty() {
        eprintln!(
            "note: migrated {url} to schema version {} (applied {:?})",
            r.current, r.applied
        );
    }
    Ok(())
}

async fn connect(cli: &Cli) -> anyhow::Result<Client> {
    let config = backlog::BackendConfig {
        max_connections: cli.max_connections,
        ..backlog::BackendConfig::default()
    };
    let client = Client::connect_with(&cli.database_url, &config).await?;
    Ok(client.with_payload_limit(cli.payload_limit as usize))
}

/// Runs the command.
pub async fn run(cli: Cli) -> anyhow::Result<ExitCode> {
    // Everything a user typed is checked before the database is touched.
    match &cli.command {
        Command::Enqueue(a) => enqueue::check(a, cli.payload_limit as usize)?,
        Command::Work(a) => {
            for q in &a.queues {
                queue_name(q)?;
            }
            kinds(&a.kinds)?;
        }
        Command::Job(JobCommand::List { queue, state, .. }) => {
            queue_name(queue)?;
            if let Some(s) = state {
                s.parse::<StateFilter>()?;
            }
        }
        Command::Stats { queue: Some(q), .. }
        | Command::Dead(DeadCommand::List { queue: q, .. })
        | Command::Dead(DeadCommand::Redrive { queue: q, .. })
        | Command::Queue(QueueCommand::Pause { queue: q })
        | Command::Queue(QueueCommand::Resume { queue: q })
        | Command::Queue(QueueCommand::Show { queue: q, .. })
        | Command::Audit { queue: Some(q), .. } => {
            queue_name(q)?;
        }
        Command::Queue(QueueCommand::Set(a)) => admin::check_set(a)?,
        _ => {}
    }
    let serve_config = match &cli.command {
        Command::Serve(a) => Some(serve::check(a)?),
        _ => None,
    };
    if let Command::Token(c) = cli.command {
        return serve::token(c);
    }
    if let Command::BenchProcess {
        queue,
        concurrency,
        connections,
        handler_ms,
    } = &cli.command
    {
        let handler = std::time::Duration::from_millis(*handler_ms);
        bench::procs::child(
            &cli.database_url,
            queue,
            *concurrency,
            *connections,
            handler,
        )
        .await?;
        return Ok(ExitCode::SUCCESS);
    }
    let client = connect(&cli).await?;
    if !matches!(cli.command, Command::Migrate) {
        migrate_embedded(&client, &cli.database_url).await?;
    }
    let code = match cli.command {
        Command::Work(a) => work::run(client, a).await?,
        Command::Demo { jobs } => demo::run(client, jobs).await?,
        Command::Serve(_) => serve::run(client, serve_config.expect("checked above")).await?,
        Command::Token(_) | Command::BenchProcess { .. } => {
            unreachable!("handled before connecting")
        }
        Command::Bench(a) => {
            client.close().await;
            bench::run(&cli.database_url, *a).await?
        }
        command => {
            let code = one_shot(&client, command).await;
            // Closing adds what this process counted (jobs enqueued, redriven …) to
            // backlog_stat: a short-lived command exits before the periodic flush.
            client.close().await;
            code?
        }
    };
    Ok(code)
}

/// The commands that borrow the client and end.
async fn one_shot(client: &Client, command: Command) -> anyhow::Result<ExitCode> {
    let code = match command {
        Command::Migrate => {
            let r = client.migrate().await?;
            if r.applied.is_empty() {
                println!("schema is at version {} (nothing to do)", r.current);
            } else {
                println!(
                    "schema is at version {} (applied {:?})",
                    r.current, r.applied
                );
            }
            ExitCode::SUCCESS
        }
        Command::Enqueue(a) => enqueue::run(client, a).await?,
        Command::Stats { queue, json } => admin::stats(client, queue, json).await?,
        Command::Job(c) => admin::job(client, c).await?,
        Command::Dead(c) => admin::dead(client, c).await?,
        Command::Queue(c) => admin::queue(client, c).await?,
        Command::Audit { queue, limit, json } => {
            admin::audit_log(client, queue, limit, json).await?
        }
        Command::Work(_)
        | Command::Demo { .. }
        | Command::Serve(_)
        | Command::Token(_)
        | Command::BenchProcess { .. }
        | Command::Bench(_) => unreachable!("run with the client by value"),
    };
    Ok(code)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn listen_addresses_and_host_names_parse_or_say_why() {
        assert_eq!(
            parse_listen("localhost:8080").unwrap(),
            "127.0.0.1:8080".parse().unwrap()
        );
        assert_eq!(parse_listen("[::1]:0").unwrap(), "[::1]:0".parse().unwrap());
        assert!(parse_listen("localhost").is_err());
        assert!(parse_listen("localhost:http").unwrap_err().contains("port"));
        assert_eq!(parse_host_name("Proxy.Example.").unwrap(), "proxy.example");
        assert_eq!(parse_host_name("[::1]").unwrap(), "[::1]");
        for bad in ["", "a..b", "http://x", "x:80", "a b", "x/y"] {
            assert!(parse_host_name(bad).is_err(), "{bad:?}");
        }
    }
}
