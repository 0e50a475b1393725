//! The producer process of the fault tests, and the check of what it recorded.
//!
//! It enqueues jobs one call at a time, job `i` with payload `i` and unique key `job-{i}`, and
//! writes every call's outcome to a file, one line each: `{i} ok {id} {created}`, `{i} err
//! {transient|permanent} {message}`, or `{i} found {id}`. A call that fails may have committed
//! (the connection was lost before the answer came), so before enqueueing job `i` again the
//! producer looks its key up in any state and takes the job it finds. The lookup is needed: a
//! unique key is only taken while its job is unfinished, so a job that committed and was
//! completed meanwhile would otherwise be enqueued twice. A commit still in flight when the
//! lookup runs is no hole either: the new insert waits on the first one's key and then returns
//! its id.
// The child process uses `produce` alone; the server tier's tests use the rest.
#![cfg_attr(not(feature = "servers"), allow(dead_code))]

use std::collections::{HashMap, HashSet};
use std::io::Write;
use std::time::Duration;

use backlog::{Client, JobListOpts, JobState, QueueName, UniqueKey};

use super::TestDb;

/// The producer's side: enqueues `BACKLOG_CHILD_JOBS` jobs numbered from
/// `BACKLOG_CHILD_FIRST` (0 unless set) into queue `fire`, recording each call in
/// `BACKLOG_CHILD_OUT`.
pub async fn produce(url: &str) {
    let env = |name: &str| std::env::var(name).unwrap();
    let jobs: i64 = env("BACKLOG_CHILD_JOBS").parse().unwrap();
    let first: i64 = std::env::var("BACKLOG_CHILD_FIRST").map_or(0, |v| v.parse().unwrap());
    let mut out = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(env("BACKLOG_CHILD_OUT"))
        .unwrap();
    let client = super::connect_child(url).await;
    let fire = QueueName::new("fire").unwrap();
    for i in first..first + jobs {
        let key = UniqueKey::new(format!("job-{i}")).unwrap();
        let mut uncertain = false;
        loop {
            if uncertain {
                match find(&client, &fire, &key).await {
                    Ok(Some(id)) => {
                        writeln!(out, "{i} found {id}").unwrap();
                        break;
                    }
                    Ok(None) => {}
                    Err(e) => {
                        record_err(&mut out, i, &e);
                        tokio::time::sleep(Duration::from_millis(50)).await;
                        continue;
                    }
                }
            }
            let mut job = client.new_job("fire", &i).unwrap();
            job.unique_key = Some(key.clone());
            match client.enqueue(job).await {
                Ok(o) => {
                    writeln!(out, "{i} ok {} {}", o.id, o.created).unwrap();
                    break;
                }
                Err(e) => {
                    record_err(&mut out, i, &e);
                    uncertain = true;
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
            }
        }
    }
}

fn record_err(out: &mut std::fs::File, i: i64, e: &backlog::Error) {
    let kind = if e.is_transient() {
        "transient"
    } else {
        "permanent"
    };
    let msg = e.to_string().replace('\n', " ");
    writeln!(out, "{i} err {kind} {msg}").unwrap();
}

/// The job holding `key`, in any state.
async fn find(client: &Client, queue: &QueueName, key: &UniqueKey) -> backlog::Result<Option<i64>> {
    let jobs = client
        .job_list(&JobListOpts {
            queue: Some(queue.clone()),
            unique_key: Some(key.clone()),
            limit: 10,
            ..JobListOpts::default()
        })
        .await?;
    Ok(jobs.first().map(|j| j.id))
}

/// What the producer's file says.
#[derive(Debug, Default)]
pub struct Calls {
    /// Job number to the id its last call returned or found.
    pub ids: HashMap<i64, i64>,
    /// Calls that returned an id.
    pub ok: usize,
    /// Of them, calls that found the job already there (`created` false).
    pub reused: usize,
    /// Lookups after an error that found the job committed.
    pub found: usize,
    /// Calls that returned an error, and those of them not marked transient.
    pub errors: usize,
    pub permanent: Vec<String>,
}

/// Reads the producer's file (also while it still writes: a last partial line is left out).
pub fn read_calls(path: &std::path::Path) -> Calls {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let mut calls = Calls::default();
    let complete = text.rsplit_once('\n').map_or("", |(done, _)| done);
    for line in complete.lines() {
        let mut parts = line.splitn(4, ' ');
        let i: i64 = parts.next().unwrap().parse().unwrap();
        let what = parts.next().unwrap();
        let (a, b) = (parts.next(), parts.next());
        match what {
            "ok" | "found" => {
                let id: i64 = a.unwrap().parse().unwrap();
                assert!(
                    calls.ids.insert(i, id).is_none(),
                    "job {i} was recorded twice"
                );
                if what == "found" {
                    calls.found += 1;
                } else {
                    calls.ok += 1;
                    calls.reused += usize::from(b == Some("false"));
                }
            }
            "err" => {
                calls.errors += 1;
                if a != Some("transient") {
                    calls.permanent.push(line.to_owned());
                }
            }
            other => panic!("unknown producer line {other}: {line}"),
        }
    }
    calls
}

/// Every job `first..first + jobs` got an id; each id is a distinct job with the job's key,
/// completed; the queue holds no other job with a key (a retry after an unknown outcome
/// duplicated nothing); every error was reported as transient; attempts stayed within
/// `max_attempts`. Returns the calls and the most attempts a job took.
pub async fn check_calls(
    db: &TestDb,
    path: &std::path::Path,
    first: i64,
    jobs: i64,
    max_attempts: i32,
) -> (Calls, i32) {
    let calls = read_calls(path);
    assert!(
        calls.permanent.is_empty(),
        "errors not reported as transient: {:?}",
        calls.permanent
    );
    for i in first..first + jobs {
        assert!(
            calls.ids.contains_key(&i),
            "job {i} has no recorded outcome"
        );
    }
    let ids: HashSet<i64> = calls.ids.values().copied().collect();
    assert_eq!(ids.len() as i64, jobs, "two jobs were given one id");
    let stored = all_jobs(&db.client).await;
    let keyed: Vec<_> = stored.iter().filter(|j| j.unique_key.is_some()).collect();
    assert_eq!(
        keyed.len() as i64,
        jobs,
        "jobs with a key: {} for {jobs} enqueued (a duplicate or a loss)",
        keyed.len()
    );
    let by_id: HashMap<i64, &backlog::Job> = stored.iter().map(|j| (j.id, j)).collect();
    for (i, id) in &calls.ids {
        let job = by_id
            .get(id)
            .unwrap_or_else(|| panic!("job {i}: id {id} was returned but does not exist"));
        assert_eq!(job.unique_key.as_deref(), Some(&*format!("job-{i}")));
        assert_eq!(job.payload, i.to_string());
        assert_eq!(job.state, JobState::Completed, "job {i} ({id})");
    }
    let most = stored.iter().map(|j| j.attempt).max().unwrap_or(0);
    assert!(
        most <= max_attempts,
        "a job took {most} attempts, more than {max_attempts}"
    );
    (calls, most)
}

/// Every job of queue `fire`, in pages.
async fn all_jobs(client: &Client) -> Vec<backlog::Job> {
    let fire = QueueName::new("fire").unwrap();
    let mut out = Vec::new();
    loop {
        let page = client
            .job_list(&JobListOpts {
                queue: Some(fire.clone()),
                after_id: out.last().map_or(0, |j: &backlog::Job| j.id),
                limit: 1000,
                ..JobListOpts::default()
            })
            .await
            .unwrap();
        if page.is_empty() {
            return out;
        }
        out.extend(page);
    }
}

/// Starts the producer process: jobs `first..first + jobs`, its calls recorded in `out`.
pub fn spawn(url: &str, first: i64, jobs: i64, out: &std::path::Path) -> std::process::Child {
    let env = [
        ("BACKLOG_CHILD_FIRST", first.to_string()),
        ("BACKLOG_CHILD_JOBS", jobs.to_string()),
        ("BACKLOG_CHILD_OUT", out.display().to_string()),
    ];
    super::spawn_child_with("producer", url, "producer", &env)
}

/// Waits for the producer to end on its own, successfully, within `limit`.
pub async fn wait(producer: &mut std::process::Child, limit: Duration) {
    let waiting = std::time::Instant::now();
    let status = loop {
        if let Some(s) = producer.try_wait().unwrap() {
            break s;
        }
        assert!(waiting.elapsed() < limit, "the producer did not finish");
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert!(status.success(), "the producer failed: {status}");
}

/// A job of queue `fire` due in an hour, with no key: it counts as pending, so draining
/// workers do not end while the producer is still at work. Cancel it once the producer is done.
pub async fn hold_drain(client: &Client) -> i64 {
    let mut hold = client.new_job("fire", &-1).unwrap();
    hold.run_at = Some(client.now() + 3_600_000_000);
    client.enqueue(hold).await.unwrap().id
}
