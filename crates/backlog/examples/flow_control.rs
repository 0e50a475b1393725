//! Flow control across processes: a ledger queue whose entries of one account must be booked one
//! at a time and in order, and whose bank allows 3 calls at once over every worker and 2 calls a
//! second per account.
//!
//! Two workers (as two processes would, each with its own connection pool) of 4 slots each work
//! 6 accounts × 5 entries: never more than 3 entries run at once, each account's entries run in
//! the order they were enqueued, and each account's fifth entry is claimed no sooner than 1.5 s
//! after its first (two at once, then one every half second).
//!
//!     cargo run -p backlog --example flow_control
//!
//! Uses `BACKLOG_DATABASE_URL` when set (any backend), else a SQLite file in a temporary folder.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use backlog::{
    Client, DrainMode, GroupKey, JobContext, Outcome, QueueName, QueueSettings, RateLimit, Worker,
};
use serde::{Deserialize, Serialize};

#[derive(Debug, Serialize, Deserialize)]
struct Entry {
    account: String,
    seq: u32,
}

/// What the handlers saw: each account's entries in the order they ran (and when each was
/// claimed, in microseconds: what the rate limit governs), and the most that ran at once.
#[derive(Default)]
struct Seen {
    booked: Mutex<BTreeMap<String, Vec<(u32, i64)>>>,
    running: AtomicUsize,
    most: AtomicUsize,
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let dir = tempfile::tempdir()?;
    let url = std::env::var("BACKLOG_DATABASE_URL")
        .unwrap_or_else(|_| format!("sqlite://{}", dir.path().join("example.db").display()));
    let client = Client::connect(&url).await?;
    client.migrate().await?;

    // At most 3 running at once over every process; one entry per account at a time (the
    // default group concurrency), and at most 2 started a second per account.
    client
        .queue_configure(&QueueSettings {
            global_concurrency: Some(3),
            group_rate_limit: Some(RateLimit {
                starts: 2,
                period: Duration::from_secs(1),
            }),
            ..QueueSettings::defaults(QueueName::new("ledger")?)
        })
        .await?;
    let mut jobs = vec![];
    for seq in 1..=5 {
        for account in ["acme", "globex", "initech", "umbrella", "hooli", "stark"] {
            let entry = Entry {
                account: account.into(),
                seq,
            };
            jobs.push(
                client
                    .new_job("ledger", &entry)?
                    .in_group(GroupKey::new(account)?),
            );
        }
    }
    client.enqueue_many(jobs).await?;

    let seen = Arc::new(Seen::default());
    let mut runs = vec![];
    for _ in 0..2 {
        let seen = seen.clone();
        let worker = Worker::builder(Client::connect(&url).await?)
            .queue("ledger", 4)
            .fallback_handler(move |ctx: JobContext| {
                let seen = seen.clone();
                async move {
                    let entry: Entry = serde_json::from_str(&ctx.job().payload)?;
                    let now = seen.running.fetch_add(1, Ordering::SeqCst) + 1;
                    seen.most.fetch_max(now, Ordering::SeqCst);
                    // Claimed at its lease's start (the queue's lease is the same for every
                    // job); a handler's own start may lag its claim on a busy machine.
                    let claimed = ctx.job().lease_expires_at;
                    (seen.booked.lock().unwrap())
                        .entry(entry.account)
                        .or_default()
                        .push((entry.seq, claimed));
                    tokio::time::sleep(Duration::from_millis(5)).await; // the bank's call
                    seen.running.fetch_sub(1, Ordering::SeqCst);
                    Ok(Outcome::Complete)
                }
            })
            .configure(|c| c.drain = Some(DrainMode::All))
            .build()?;
        runs.push(tokio::spawn(async move {
            worker.run(backlog::CancellationToken::new()).await
        }));
    }
    let mut completed = 0;
    for run in runs {
        completed += run.await??.completed;
    }

    let booked = seen.booked.lock().unwrap();
    for (account, runs) in booked.iter() {
        let seqs: Vec<u32> = runs.iter().map(|r| r.0).collect();
        let span = Duration::from_micros((runs[runs.len() - 1].1 - runs[0].1) as u64);
        println!("{account}: {seqs:?} over {:.2}s", span.as_secs_f64());
        assert_eq!(seqs, [1, 2, 3, 4, 5], "{account} ran out of order");
        // Two at once, then one each half second: the fifth claimed 1.5 s after the first
        // (less the clock's millisecond grain).
        assert!(
            span >= Duration::from_millis(1490),
            "{account}: 5 starts in {span:?}"
        );
    }
    let most = seen.most.load(Ordering::SeqCst);
    println!("completed {completed} entries, at most {most} at once");
    assert_eq!(completed, 30);
    assert!(most <= 3, "{most} ran at once");
    Ok(())
}
