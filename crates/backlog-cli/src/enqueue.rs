//! `backlog enqueue`: one job, or one per line of a JSONL file.

use std::io::{BufRead, IsTerminal, Read};
use std::process::ExitCode;

use anyhow::{Context, bail};
use backlog::{Client, Kind, NewJob, Payload, TraceContext, UniqueKey};

use crate::cli::{EnqueueArgs, queue_name};

/// Jobs per INSERT statement when reading JSONL.
const BATCH: usize = 1000;

/// Checks everything that can be checked without reading stdin or the database.
pub fn check(a: &EnqueueArgs, limit: usize) -> anyhow::Result<()> {
    queue_name(&a.queue)?;
    if let Some(k) = &a.kind {
        Kind::new(k.as_str())?;
    }
    if let Some(k) = &a.unique_key {
        UniqueKey::new(k.as_str())?;
    }
    trace_context(a)?;
    match (&a.payload, &a.jsonl) {
        (None, None) => bail!("a payload is required: give JSON, - to read stdin, or --jsonl FILE"),
        (Some(p), None) if p != "-" => {
            Payload::parse(p.as_str(), limit)?;
        }
        _ => {}
    }
    Ok(())
}

fn template(client: &Client, a: &EnqueueArgs, payload: Payload) -> anyhow::Result<NewJob> {
    let mut job = NewJob::new(queue_name(&a.queue)?, payload);
    job.priority = a.priority;
    job.kind = a.kind.as_deref().map(Kind::new).transpose()?;
    job.max_attempts = a.max_attempts;
    job.unique_key = a.unique_key.as_deref().map(UniqueKey::new).transpose()?;
    job.run_at = a.delay.map(|d| client.now() + d.as_micros() as i64);
    job.trace_context = trace_context(a)?;
    Ok(job)
}

/// The trace context given with --traceparent (or `TRACEPARENT`), validated.
fn trace_context(a: &EnqueueArgs) -> anyhow::Result<Option<TraceContext>> {
    Ok(a.traceparent
        .as_deref()
        .map(|tp| TraceContext::new(tp, a.tracestate.as_deref()))
        .transpose()?)
}

/// Runs the command.
pub async fn run(client: &Client, a: EnqueueArgs) -> anyhow::Result<ExitCode> {
    if let Some(path) = &a.jsonl {
        return jsonl(client, &a, path).await;
    }
    let text = match a.payload.as_deref() {
        Some("-") => {
            let mut s = String::new();
            std::io::stdin()
                .take(client.payload_limit() as u64 + 1)
                .read_to_string(&mut s)
                .context("reading the payload from stdin")?;
            s
        }
        Some(p) => p.to_owned(),
        None => unreachable!("checked"),
    };
    let job = template(client, &a, client.payload(text.trim_end().to_owned())?)?;
    let out = client.enqueue(job).await?;
    if !out.created {
        eprintln!("a job with this unique key is already pending: {}", out.id);
    }
    println!("{}", out.id);
    Ok(ExitCode::SUCCESS)
}

async fn jsonl(
    client: &Client,
    a: &EnqueueArgs,
    path: &std::path::Path,
) -> anyhow::Result<ExitCode> {
    let reader: Box<dyn BufRead> = if path.as_os_str() == "-" {
        Box::new(std::io::BufReader::new(std::io::stdin()))
    } else {
        Box::new(std::io::BufReader::new(
            std::fs::File::open(path).with_context(|| format!("cannot open {}", path.display()))?,
        ))
    };
    // Every line is validated before anything is enqueued, so bad input changes nothing.
    let mut jobs = vec![];
    for (n, line) in reader.lines().enumerate() {
        let line = line.with_context(|| format!("reading line {}", n + 1))?;
        if line.trim().is_empty() {
            continue;
        }
        let payload = client
            .payload(line)
            .with_context(|| format!("line {}", n + 1))?;
        jobs.push(template(client, a, payload)?);
    }
    let total = jobs.len();
    let bar = std::io::stderr().is_terminal().then(|| {
        let bar = indicatif::ProgressBar::new(total as u64);
        bar.set_style(
            indicatif::ProgressStyle::with_template(
                "{bar:40} {pos}/{len} jobs {per_sec} eta {eta}",
            )
            .expect("valid template"),
        );
        bar
    });
    let mut done = 0;
    let mut iter = jobs.into_iter();
    loop {
        let chunk: Vec<NewJob> = iter.by_ref().take(BATCH).collect();
        if chunk.is_empty() {
            break;
        }
        let n = chunk.len();
        client.enqueue_many(chunk).await?;
        done += n;
        if let Some(b) = &bar {
            b.set_position(done as u64);
        }
    }
    if let Some(b) = bar {
        b.finish_and_clear();
    }
    println!("{done}");
    Ok(ExitCode::SUCCESS)
}
