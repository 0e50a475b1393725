//! Human-readable output of jobs, queues and stats.

use backlog::{Job, QueueInfo, QueueSettings, QueueStats, format_duration};

/// A time in microseconds since the epoch, as RFC 3339 UTC.
pub fn time(us: i64) -> String {
    humantime::format_rfc3339_millis(backlog::view::system_time(us)).to_string()
}

/// `job show`.
pub fn job(j: &Job, now: i64) -> String {
    let mut s = String::new();
    let mut line = |k: &str, v: String| s.push_str(&format!("{k:<13} {v}\n"));
    line("id", j.id.to_string());
    line("queue", j.queue.clone());
    line("kind", j.kind.clone().unwrap_or_else(|| "-".into()));
    line("state", j.reported_state(now).to_string());
    line("priority", j.priority.to_string());
    line(
        "attempt",
        match j.max_attempts {
            Some(m) => format!("{} of {m}", j.attempt),
            None => format!("{} (max: the queue's)", j.attempt),
        },
    );
    line("run at", time(j.run_at));
    line("created at", time(j.created_at));
    if let Some(t) = j.attempted_at {
        line("attempted at", time(t));
    }
    if let Some(t) = j.finished_at {
        line("finished at", time(t));
    }
    if let Some(o) = &j.lease_owner {
        line("worker", o.clone());
    }
    if let Some(t) = j.lease_expires_at {
        line("lease until", time(t));
    }
    if let Some(k) = &j.unique_key {
        line("unique key", k.clone());
    }
    if let Some(g) = &j.group {
        line("group", g.clone());
    }
    line("payload", j.payload.clone());
    if let Some(p) = &j.progress {
        line("progress", p.clone());
    }
    if let Some(r) = &j.result {
        line("result", r.clone());
    }
    if j.errors.is_empty() {
        line("errors", "none".into());
    } else {
        line("errors", String::new());
        for e in &j.errors {
            s.push_str(&format!(
                "  attempt {} at {}: {}\n",
                e.attempt,
                time(e.at),
                e.error
            ));
        }
    }
    s
}

/// `job list`, `dead list`.
pub fn jobs(list: &[Job], now: i64) -> String {
    let mut s = format!(
        "{:>10}  {:<10} {:<16} {:>7}  {:<24} {}\n",
        "ID", "STATE", "KIND", "ATTEMPT", "RUN AT", "LAST ERROR"
    );
    for j in list {
        // A completed job's errors are of attempts before the one that completed it.
        let err = match j.state {
            backlog::JobState::Completed => None,
            _ => j.errors.last(),
        };
        let err = err.map(|e| clip(&e.error, 60)).unwrap_or_default();
        s.push_str(&format!(
            "{:>10}  {:<10} {:<16} {:>7}  {:<24} {}\n",
            j.id,
            j.reported_state(now),
            j.kind.as_deref().unwrap_or("-"),
            j.attempt,
            time(j.run_at),
            err
        ));
    }
    s
}

/// `stats`. ARCHIVED counts the jobs moved to `backlog_job_archive`, which the other columns no
/// longer show.
pub fn stats(rows: &[(String, QueueStats)]) -> String {
    let mut s = format!(
        "{:<24} {:>10} {:>10} {:>9} {:>8} {:>8} {:>10} {:>8} {:>10} {:>8} {:>9}\n",
        "QUEUE",
        "AVAILABLE",
        "SCHEDULED",
        "RETRYING",
        "WAITING",
        "RUNNING",
        "COMPLETED",
        "DEAD",
        "CANCELLED",
        "HELD",
        "ARCHIVED"
    );
    for (q, st) in rows {
        s.push_str(&format!(
            "{:<24} {:>10} {:>10} {:>9} {:>8} {:>8} {:>10} {:>8} {:>10} {:>8} {:>9}\n",
            q,
            st.available,
            st.scheduled,
            st.retrying,
            st.waiting,
            st.running,
            st.completed,
            st.dead,
            st.cancelled,
            st.held,
            st.archived
        ));
    }
    s
}

/// `queue show`.
pub fn settings(q: &QueueSettings) -> String {
    format!(
        "name          {}\npaused        {}\nmax attempts  {}\nbackoff       {} doubling up to {}\nlease         {}\norder         {}\nretention     {}\nconcurrency   {}\n",
        q.name,
        q.paused,
        q.max_attempts,
        format_duration(q.backoff_base),
        format_duration(q.backoff_max),
        format_duration(q.lease),
        q.order.as_str(),
        q.retention.as_str(),
        q.concurrency
            .map(|c| c.to_string())
            .unwrap_or_else(|| "worker's setting".into())
    ) + &format!(
        "global limit  {}\nrate limit    {}\ngroups        {} at a time, on failure {}\ngroup rate    {}\nshards        {}\n",
        q.global_concurrency
            .map(|c| format!("{c} running at once, every process"))
            .unwrap_or_else(|| "none".into()),
        rate(q.rate_limit, "every process"),
        q.group_concurrency,
        q.group_on_failure.as_str(),
        rate(q.group_rate_limit, "in each group, every process"),
        match q.shards {
            1 => "1 (one strict order)".to_owned(),
            n => format!("{n} (order kept within each shard)"),
        },
    )
}

/// A rate limit as `queue show` tells it.
fn rate(limit: Option<backlog::RateLimit>, scope: &str) -> String {
    limit
        .map(|r| {
            format!(
                "{} starts per {}, {scope}",
                r.starts,
                format_duration(r.period)
            )
        })
        .unwrap_or_else(|| "none".into())
}

/// `queue show`, after the settings: what runs against the limits, and the groups held up.
pub fn flow(q: &QueueSettings, f: &backlog::QueueFlow) -> String {
    let mut s = format!(
        "running       {}{}\nwaiting       {} job(s) in {} group(s) behind a running or failing job\n",
        f.running,
        q.global_concurrency
            .map(|c| format!(" of {c} (global limit)"))
            .unwrap_or_default(),
        f.waiting,
        f.waiting_groups,
    );
    if !f.blocked.is_empty() {
        s.push_str("blocked groups (a failed job holds each until it succeeds or is dead; a group's rate limit holds the rest):\n");
        for b in &f.blocked {
            let when = match b.reason {
                backlog::BlockReason::Retry => "retries at",
                backlog::BlockReason::Rate => "rate limit, starts at",
            };
            s.push_str(&format!(
                "  {:<24} job {} {when} {}; {} waiting behind it\n",
                b.group,
                b.job_id,
                time(b.retry_at),
                b.waiting
            ));
        }
    }
    s
}

/// `queue list`.
pub fn queues(list: &[QueueInfo]) -> String {
    let mut s = format!(
        "{:<24} {:<7} {:>8} {:<5} {:<8} {:>9}\n",
        "QUEUE", "PAUSED", "PENDING", "ORDER", "RETAIN", "ATTEMPTS"
    );
    for i in list {
        let q = &i.settings;
        s.push_str(&format!(
            "{:<24} {:<7} {:>8} {:<5} {:<8} {:>9}\n",
            q.name.as_str(),
            if q.paused { "yes" } else { "no" },
            i.pending,
            q.order.as_str(),
            q.retention.as_str(),
            q.max_attempts
        ));
    }
    s
}

/// `audit`.
pub fn audit(entries: &[backlog::AuditEntry]) -> String {
    let mut s = format!(
        "{:>6}  {:<24} {:<16} {:<15} {:<16} {:>8}  {}\n",
        "ID", "AT", "ACTOR", "ACTION", "QUEUE", "JOB", "DETAIL"
    );
    for e in entries {
        s.push_str(&format!(
            "{:>6}  {:<24} {:<16} {:<15} {:<16} {:>8}  {}\n",
            e.id,
            time(e.at),
            e.actor,
            e.action,
            e.queue.as_deref().unwrap_or("-"),
            e.job_id.map_or("-".into(), |j| j.to_string()),
            e.detail
        ));
    }
    s
}

/// `cron`: one line per periodic schedule.
pub fn cron(schedules: &[backlog::CronSchedule]) -> String {
    let mut s = format!(
        "{:<24} {:<18} {:<16} {:<24} {:<24}\n",
        "NAME", "SCHEDULE", "QUEUE", "LAST RUN", "NEXT RUN"
    );
    for c in schedules {
        s.push_str(&format!(
            "{:<24} {:<18} {:<16} {:<24} {:<24}\n",
            c.name,
            c.schedule.as_deref().unwrap_or("-"),
            c.queue.as_deref().unwrap_or("-"),
            if c.last_tick > 0 {
                time(c.last_tick)
            } else {
                "never".into()
            },
            c.next_tick.map_or("-".into(), time)
        ));
    }
    s
}

/// `workers`: one line per registered worker; `now` tells the expired ones.
pub fn workers(workers: &[backlog::WorkerRegistration], now: i64) -> String {
    let mut s = format!(
        "{:<36} {:>8} {:>7}  {:<24} {:<24} {:<8} {}\n",
        "WORKER", "PID", "RUNNING", "STARTED", "LAST SEEN", "STATE", "QUEUES"
    );
    for w in workers {
        let queues: Vec<serde_json::Value> = serde_json::from_str(&w.queues).unwrap_or_default();
        let queues: Vec<String> = queues
            .iter()
            .map(|q| {
                format!(
                    "{}×{}",
                    q["queue"].as_str().unwrap_or("?"),
                    q["concurrency"]
                )
            })
            .collect();
        s.push_str(&format!(
            "{:<36} {:>8} {:>7}  {:<24} {:<24} {:<8} {}\n",
            w.id,
            w.pid,
            w.running,
            time(w.started_at),
            time(w.seen_at),
            if w.expires_at < now {
                "expired"
            } else {
                "live"
            },
            queues.join(", ")
        ));
    }
    s
}

/// `text` on one line (runs of whitespace made one space), cut at a word boundary to at most
/// `width` characters with `…` when longer.
fn clip(text: &str, width: usize) -> String {
    let line = text.split_whitespace().collect::<Vec<_>>().join(" ");
    if line.chars().count() <= width {
        return line;
    }
    let cut: String = line.chars().take(width - 1).collect();
    let cut = match cut.rfind(' ') {
        Some(i) if i > width / 2 => &cut[..i],
        _ => &cut,
    };
    format!("{}…", cut.trim_end())
}

#[cfg(test)]
mod tests {
    use super::clip;

    #[test]
    fn errors_are_clipped_at_a_word() {
        assert_eq!(clip("short", 60), "short");
        assert_eq!(clip("two\nlines  here", 60), "two lines here");
        let long = "command exit status: 1: the upstream server refused the connection again";
        let clipped = clip(long, 40);
        assert_eq!(clipped, "command exit status: 1: the upstream…");
        assert!(clipped.chars().count() <= 40);
        // One word longer than the width is cut inside it.
        assert_eq!(clip(&"x".repeat(50), 10), format!("{}…", "x".repeat(9)));
        assert_eq!(clip("ünïcödé wörds everywhere", 12), "ünïcödé…");
    }
}
