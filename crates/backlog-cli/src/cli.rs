//! Arguments, exactly as PRODUCT.md's command table says, and dispatch.

use std::process::ExitCode;

use backlog::{Client, SqlBackend, StateFilter};
use clap::{Parser, Subcommand};

use crate::admin::{DeadCommand, JobCommand, QueueCommand};
use crate::args::{kinds, queue_name};
use crate::enqueue::EnqueueArgs;
use crate::serve::{ServeArgs, TokenCommand};
use crate::work::WorkArgs;
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
    /// Measures enqueue rates, end-to-end throughput and latency against bare SQL on the same
    /// database: runs `backlog-bench` (next to this binary, or on PATH) with these arguments.
    #[command(disable_help_flag = true)]
    Bench {
        /// The benchmark's arguments (`backlog bench --help` lists them).
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        args: Vec<std::ffi::OsString>,
    },
    /// Serves the HTTP API, Prometheus /metrics and health checks.
    Serve(ServeArgs),
    /// The audit log: operators' actions (retry, cancel, hold, release, redrive, pause, resume,
    /// settings), newest first, with who and when.
    Audit {
        #[command(flatten)]
        filter: admin::AuditFilter,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// The workers registered in the database: every `backlog work` process and library worker,
    /// with its queues, jobs running and last beat (every 5 s); "expired" is one that stopped
    /// without saying so.
    Workers {
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// The periodic schedules: what each is, its jobs' queue and kind, its last and next run.
    Cron {
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
    /// Prints the shell completion script for SHELL, made from these very definitions (bash:
    /// `backlog completions bash > ~/.local/share/bash-completion/completions/backlog`).
    Completions {
        /// The shell.
        shell: clap_complete::Shell,
    },
    /// Prints the man page, in roff (`backlog man > ~/.local/share/man/man1/backlog.1`).
    Man,
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
        | Command::Audit {
            filter: admin::AuditFilter { queue: Some(q), .. },
            ..
        } => {
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
    // Completions and the man page come from the definitions above, with no database.
    if let Command::Completions { shell } = &cli.command {
        let mut command = <Cli as clap::CommandFactory>::command();
        // Into a buffer first: clap_complete panics on a failed write (a closed pipe).
        let mut script = Vec::new();
        clap_complete::generate(*shell, &mut command, "backlog", &mut script);
        std::io::Write::write_all(&mut std::io::stdout(), &script)?;
        return Ok(ExitCode::SUCCESS);
    }
    if let Command::Man = &cli.command {
        let command = <Cli as clap::CommandFactory>::command();
        clap_mangen::Man::new(command).render(&mut std::io::stdout())?;
        return Ok(ExitCode::SUCCESS);
    }
    if let Command::Bench { args } = &cli.command {
        return bench::run(&cli.database_url, args);
    }
    let client = connect(&cli).await?;
    if !matches!(cli.command, Command::Migrate) {
        migrate_embedded(&client, &cli.database_url).await?;
    }
    let code = match cli.command {
        Command::Work(a) => work::run(client, a).await?,
        Command::Demo { jobs } => demo::run(client, jobs).await?,
        Command::Serve(_) => serve::run(client, serve_config.expect("checked above")).await?,
        Command::Token(_) | Command::Bench { .. } => {
            unreachable!("handled before connecting")
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
        Command::Audit { filter, json } => admin::audit_log(client, filter, json).await?,
        Command::Workers { json } => admin::workers(client, json).await?,
        Command::Cron { json } => admin::cron(client, json).await?,
        Command::Work(_)
        | Command::Demo { .. }
        | Command::Serve(_)
        | Command::Token(_)
        | Command::Completions { .. }
        | Command::Man
        | Command::Bench { .. } => unreachable!("run with the client by value, or without one"),
    };
    Ok(code)
}
