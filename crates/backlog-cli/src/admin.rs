//! `stats`, `job …`, `dead …` and `queue …`.

use std::process::ExitCode;
use std::time::Duration;

use backlog::{Client, JobState, QueueSettings, StateFilter};

use clap::{Args, Subcommand};

use crate::args::{known_queue, parse_duration, queue_name};
use crate::output;
use backlog::view::JobView;

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
    /// Makes a scheduled job, or one waiting to retry, due at once (attempts kept).
    RunNow {
        /// Job id.
        id: i64,
    },
    /// Deletes a job that is not running, wherever it is kept (an archived one too).
    Delete {
        /// Job id.
        id: i64,
    },
    /// Retries, cancels, holds, releases, runs now or deletes every job of a queue that the
    /// filters match, a thousand at a time, each as its one-job command would (jobs in a state
    /// the action does not apply to are passed over). Without --yes, says how many jobs match
    /// and changes nothing.
    Bulk {
        /// retry, cancel, hold, release, run-now or delete.
        #[arg(value_parser = ["retry", "cancel", "hold", "release", "run-now", "delete"])]
        action: String,
        /// Queue name.
        queue: String,
        /// Only jobs in this state: available, scheduled, retrying, running, completed, dead,
        /// cancelled, held or waiting.
        #[arg(long)]
        state: Option<String>,
        /// Only jobs of this kind.
        #[arg(long)]
        kind: Option<String>,
        /// Only jobs created longer ago than this, e.g. 1h, 7d.
        #[arg(long, value_parser = parse_duration)]
        older_than: Option<Duration>,
        /// Do it: without, nothing changes.
        #[arg(long)]
        yes: bool,
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

fn print_json<T: serde::Serialize>(v: &T) -> anyhow::Result<()> {
    println!("{}", serde_json::to_string_pretty(v)?);
    Ok(())
}

/// Checks `queue set` arguments before connecting.
pub fn check_set(a: &QueueSetArgs) -> anyhow::Result<()> {
    queue_name(&a.queue)?;
    if let Some(o) = &a.order {
        o.parse::<backlog::Ordering>()?;
    }
    if let Some(r) = &a.retention {
        r.parse::<backlog::Retention>()?;
    }
    if let Some(l) = a.lease
        && l.is_zero()
    {
        anyhow::bail!("lease must be longer than zero");
    }
    Ok(())
}

/// `stats`.
pub async fn stats(client: &Client, queue: Option<String>, json: bool) -> anyhow::Result<ExitCode> {
    let q = queue.as_deref().map(queue_name).transpose()?;
    let rows = client.stats(q.as_ref()).await?;
    if json {
        // Queues by name, each with its counts in the order of the text columns.
        let map: std::collections::BTreeMap<&str, &backlog::QueueStats> =
            rows.iter().map(|(n, s)| (n.as_str(), s)).collect();
        print_json(&map)?;
    } else {
        print!("{}", output::stats(&rows));
    }
    Ok(ExitCode::SUCCESS)
}

/// `job …`.
pub async fn job(client: &Client, cmd: JobCommand) -> anyhow::Result<ExitCode> {
    let now = client.now();
    match cmd {
        JobCommand::Show { id, json } => {
            let j = client.job(id).await?;
            if json {
                print_json(&JobView::of(&j, now)?)?;
            } else {
                print!("{}", output::job(&j, now));
            }
        }
        JobCommand::List {
            queue,
            state,
            limit,
            json,
        } => {
            let q = queue_name(&queue)?;
            let state = state.map(|s| s.parse::<StateFilter>()).transpose()?;
            let list = client.jobs(Some(&q), state, 0, limit).await?;
            if json {
                print_json(&JobView::list(&list, now)?)?;
            } else {
                print!("{}", output::jobs(&list, now));
            }
        }
        JobCommand::Retry { id } => report(client, "job.retry", client.retry(id).await?).await,
        JobCommand::Cancel { id } => report(client, "job.cancel", client.cancel(id).await?).await,
        JobCommand::Hold { id } => report(client, "job.hold", client.hold(id).await?).await,
        JobCommand::Release { id } => report(client, "job.release", client.unhold(id).await?).await,
        JobCommand::RunNow { id } => report(client, "job.run_now", client.run_now(id).await?).await,
        JobCommand::Delete { id } => {
            let j = client.delete(id).await?;
            let detail = serde_json::json!({"state": j.state.as_str(), "kind": j.kind});
            audit(client, "job.delete", &j.queue, Some(id), detail).await;
            println!("job {id} ({}, {}) deleted", j.queue, j.state);
        }
        JobCommand::Bulk {
            action,
            queue,
            state,
            kind,
            older_than,
            yes,
        } => {
            let act: backlog::BulkAction = action.parse()?;
            let filter = backlog::JobFilter {
                queue: known_queue(client, &queue).await?,
                state: state
                    .as_deref()
                    .map(str::parse::<StateFilter>)
                    .transpose()?,
                kind: kind.map(backlog::Kind::new).transpose()?,
                created_before: older_than.map(|d| now - d.as_micros() as i64),
            };
            if !yes {
                let n = client.bulk_matching(&filter).await?;
                println!("{n} job(s) of {queue} match; add --yes to {action} them");
                return Ok(ExitCode::SUCCESS);
            }
            let selection = backlog::JobSelection::Filter(filter);
            let done = client
                .bulk(act, &selection, |p| {
                    eprintln!("{} job(s) seen, {} changed", p.seen, p.changed)
                })
                .await?;
            let detail = serde_json::json!({
                "action": action, "state": state, "older_than": older_than.map(|d| d.as_secs()),
                "seen": done.seen, "changed": done.changed,
            });
            audit(client, "job.bulk", &queue, None, detail).await;
            println!("{action}: {} of {} job(s) changed", done.changed, done.seen);
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// Who the command acts as in the audit log: `cli:USER`, from `$USER` or `$LOGNAME`, else the
/// name of the process's user id (a container's root often has neither variable), else the id.
fn actor() -> String {
    let named = |v: &str| std::env::var(v).ok().filter(|u| !u.is_empty());
    let user = named("USER")
        .or_else(|| named("LOGNAME"))
        .unwrap_or_else(|| {
            let uid = nix::unistd::getuid();
            match nix::unistd::User::from_uid(uid) {
                Ok(Some(user)) => user.name,
                _ => uid.to_string(),
            }
        });
    format!("cli:{user}")
}

/// Records an action that has happened; a failure to record it is a warning, not an error.
async fn audit(
    client: &Client,
    action: &str,
    queue: &str,
    job_id: Option<i64>,
    detail: serde_json::Value,
) {
    if let Err(e) = client
        .audit(&actor(), action, Some(queue), job_id, detail)
        .await
    {
        eprintln!("warning: the audit log could not record {action}: {e}");
    }
}

async fn report(client: &Client, action: &str, j: backlog::Job) {
    let detail = serde_json::json!({"state": j.state.as_str()});
    audit(client, action, &j.queue, Some(j.id), detail).await;
    println!("job {} is now {}", j.id, j.state);
}

/// `cron`: the periodic schedules, by name.
pub async fn cron(client: &Client, json: bool) -> anyhow::Result<ExitCode> {
    let schedules = client.cron_schedules().await?;
    if json {
        let time = |t: i64| serde_json::json!(backlog::view::rfc3339(t));
        let rows: Vec<serde_json::Value> = schedules
            .iter()
            .map(|c| {
                serde_json::json!({
                    "name": c.name,
                    "schedule": c.schedule,
                    "queue": c.queue,
                    "kind": c.kind,
                    "last_run": (c.last_tick > 0).then(|| time(c.last_tick)),
                    "next_run": c.next_tick.map(time),
                    "declared_at": c.declared_at.map(time),
                })
            })
            .collect();
        print_json(&rows)?;
    } else {
        print!("{}", output::cron(&schedules));
    }
    Ok(ExitCode::SUCCESS)
}

/// `workers`: the registered workers, longest running first.
pub async fn workers(client: &Client, json: bool) -> anyhow::Result<ExitCode> {
    let workers = client.workers().await?;
    let now = client.now();
    if json {
        let rows: Vec<serde_json::Value> = workers
            .iter()
            .map(|w| {
                serde_json::json!({
                    "id": w.id,
                    "host": w.host,
                    "pid": w.pid,
                    "version": w.version,
                    "queues": serde_json::from_str::<serde_json::Value>(&w.queues)
                        .unwrap_or(serde_json::Value::Null),
                    "running": w.running,
                    "started_at": w.started_at,
                    "started_at_rfc3339": backlog::view::rfc3339(w.started_at),
                    "seen_at": w.seen_at,
                    "seen_at_rfc3339": backlog::view::rfc3339(w.seen_at),
                    "expired": w.expires_at < now,
                })
            })
            .collect();
        print_json(&rows)?;
    } else {
        print!("{}", output::workers(&workers, now));
    }
    Ok(ExitCode::SUCCESS)
}

/// Which entries of the audit log `audit` prints.
#[derive(Debug, Args)]
pub struct AuditFilter {
    /// Only this queue's.
    #[arg(long)]
    pub queue: Option<String>,
    /// Only this actor's, exactly: a token's name, `local`, or `cli:USER`.
    #[arg(long, value_parser = clap::builder::NonEmptyStringValueParser::new())]
    pub actor: Option<String>,
    /// Only this action.
    #[arg(long, value_parser = clap::builder::PossibleValuesParser::new(backlog::AUDIT_ACTIONS))]
    pub action: Option<String>,
    /// At most this many.
    #[arg(long, default_value_t = 50, value_parser = clap::value_parser!(u32).range(1..=10_000))]
    pub limit: u32,
}

/// `audit`: the operators' actions, newest first.
pub async fn audit_log(
    client: &Client,
    filter: AuditFilter,
    json: bool,
) -> anyhow::Result<ExitCode> {
    let entries = client
        .audit_log(&backlog::AuditListParams {
            queue: filter.queue.as_deref().map(queue_name).transpose()?,
            actor: filter.actor,
            action: filter.action,
            ..backlog::AuditListParams::newest(filter.limit)
        })
        .await?;
    if json {
        let rows: Vec<serde_json::Value> = entries
            .iter()
            .map(|e| {
                serde_json::json!({
                    "id": e.id,
                    "at": e.at,
                    "at_rfc3339": backlog::view::rfc3339(e.at),
                    "actor": e.actor,
                    "action": e.action,
                    "queue": e.queue,
                    "job_id": e.job_id,
                    "detail": serde_json::from_str::<serde_json::Value>(&e.detail)
                        .unwrap_or(serde_json::Value::String(e.detail.clone())),
                })
            })
            .collect();
        print_json(&rows)?;
    } else {
        print!("{}", output::audit(&entries));
    }
    Ok(ExitCode::SUCCESS)
}

/// `dead …`.
pub async fn dead(client: &Client, cmd: DeadCommand) -> anyhow::Result<ExitCode> {
    match cmd {
        DeadCommand::List { queue, limit, json } => {
            let q = queue_name(&queue)?;
            let list = client
                .jobs(
                    Some(&q),
                    Some(StateFilter::Stored(JobState::Dead)),
                    0,
                    limit,
                )
                .await?;
            let now = client.now();
            if json {
                print_json(&JobView::list(&list, now)?)?;
            } else {
                print!("{}", output::jobs(&list, now));
            }
        }
        DeadCommand::Redrive { queue, limit } => {
            let n = client
                .redrive(&known_queue(client, &queue).await?, limit)
                .await?;
            let detail = serde_json::json!({"limit": limit, "redriven": n});
            audit(client, "queue.redrive", &queue, None, detail).await;
            println!("{n}");
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// `queue …`.
pub async fn queue(client: &Client, cmd: QueueCommand) -> anyhow::Result<ExitCode> {
    match cmd {
        QueueCommand::List { json } => {
            let list = client.queues().await?;
            if json {
                print_json(&list)?;
            } else {
                print!("{}", output::queues(&list));
            }
        }
        QueueCommand::Pause { queue } => {
            client
                .queue_set_paused(&known_queue(client, &queue).await?, true)
                .await?;
            audit(client, "queue.pause", &queue, None, serde_json::json!({})).await;
            println!("queue {queue} is paused");
        }
        QueueCommand::Resume { queue } => {
            client
                .queue_set_paused(&known_queue(client, &queue).await?, false)
                .await?;
            audit(client, "queue.resume", &queue, None, serde_json::json!({})).await;
            println!("queue {queue} is running");
        }
        QueueCommand::Set(a) => {
            let name = queue_name(&a.queue)?;
            let mut s: QueueSettings = client
                .backend()
                .queue_get(&name)
                .await?
                .unwrap_or_else(|| QueueSettings::defaults(name.clone()));
            if let Some(v) = a.max_attempts {
                s.max_attempts = v;
            }
            if let Some(v) = a.backoff_base {
                s.backoff_base = v;
            }
            if let Some(v) = a.backoff_max {
                s.backoff_max = v;
            }
            if let Some(v) = a.lease {
                s.lease = v;
            }
            if let Some(v) = a.order {
                s.order = v.parse()?;
            }
            if let Some(v) = a.retention {
                s.retention = v.parse()?;
            }
            if let Some(v) = a.concurrency {
                s.concurrency = Some(v);
            }
            if let Some(v) = a.global_concurrency {
                s.global_concurrency = v.0;
            }
            if let Some(v) = a.group_concurrency {
                s.group_concurrency = v;
            }
            if let Some(v) = a.group_on_failure {
                s.group_on_failure = v.parse()?;
            }
            if let Some(v) = a.rate_limit {
                s.rate_limit = v.0;
            }
            if let Some(v) = a.group_rate_limit {
                s.group_rate_limit = v.0;
            }
            if let Some(v) = a.shards {
                s.shards = v;
            }
            // Audited by the client, with what changed.
            client.queue_configure_by(&s, &actor()).await?;
            print!("{}", output::settings(&s));
        }
        QueueCommand::Show { queue, json } => {
            let name = queue_name(&queue)?;
            let s = client.queue_settings_stored(&name).await?;
            let flow = client.queue_flow(&name).await?;
            if json {
                let mut v = serde_json::to_value(&s)?;
                v["flow"] = serde_json::to_value(&flow)?;
                print_json(&v)?;
            } else {
                print!("{}", output::settings(&s));
                print!("{}", output::flow(&s, &flow));
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}
