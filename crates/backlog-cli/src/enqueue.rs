//! `backlog enqueue`: one job, or one per line of a JSONL file.

use std::io::{BufRead, IsTerminal, Read};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{Context, bail};
use backlog::{Client, GroupKey, Kind, NewJob, Payload, TraceContext, UniqueKey};

use clap::Args;

use crate::args::{parse_duration, queue_name};

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
    /// Wait for job ID to end before running (repeat, or give IDs with commas, for several; at
    /// most 1,000): the job stays `waiting` until every one has ended.
    #[arg(long, value_name = "ID", value_delimiter = ',')]
    pub after: Vec<i64>,
    /// What the job does if one of --after ends dead or cancelled: cancel (the default; the
    /// jobs waiting for it are cancelled too), run or ignore (it runs once every one has ended).
    #[arg(long, value_name = "POLICY", requires = "after", value_parser = parse_on_parent_failure)]
    pub on_parent_failure: Option<backlog::OnParentFailure>,
    /// The W3C `tracestate` that goes with --traceparent.
    #[arg(
        long,
        env = "TRACESTATE",
        requires = "traceparent",
        value_name = "TRACESTATE"
    )]
    pub tracestate: Option<String>,
}

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
    if let Some(g) = &a.group {
        GroupKey::new(g.as_str())?;
    }
    trace_context(a)?;
    let mut probe = NewJob::new(queue_name(&a.queue)?, Payload::parse("null", limit)?);
    probe.group = a.group.as_deref().map(GroupKey::new).transpose()?;
    for &parent in &a.after {
        probe = probe.after(parent);
    }
    backlog::check_dependencies(std::slice::from_ref(&probe))?;
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
    job.group = a.group.as_deref().map(GroupKey::new).transpose()?;
    job.run_at = a.delay.map(|d| client.now() + d.as_micros() as i64);
    job.trace_context = trace_context(a)?;
    let policy = a.on_parent_failure.unwrap_or_default();
    for &parent in &a.after {
        job = job.after_with(parent, policy);
    }
    Ok(job)
}

fn parse_on_parent_failure(s: &str) -> Result<backlog::OnParentFailure, String> {
    backlog::OnParentFailure::parse(s).map_err(|e| e.to_string())
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

/// The payloads of a JSONL stream, one per line that is not blank (a line may end in `\n` or
/// `\r\n`), each validated against `limit`; an error names the first bad line's number.
pub(crate) fn read_jsonl(reader: impl BufRead, limit: usize) -> anyhow::Result<Vec<Payload>> {
    let mut payloads = vec![];
    for (n, line) in reader.lines().enumerate() {
        let line = line.with_context(|| format!("reading line {}", n + 1))?;
        if line.trim().is_empty() {
            continue;
        }
        payloads.push(Payload::parse(line, limit).with_context(|| format!("line {}", n + 1))?);
    }
    Ok(payloads)
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
    let jobs = read_jsonl(reader, client.payload_limit())?
        .into_iter()
        .map(|payload| template(client, a, payload))
        .collect::<anyhow::Result<Vec<_>>>()?;
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

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// A line of a generated JSONL file, and whether it holds a payload.
    #[derive(Debug, Clone)]
    enum Line {
        /// A JSON value, written compactly or with spaces around it.
        Json(serde_json::Value, bool),
        /// Only whitespace: skipped.
        Blank(String),
        /// Text that is not JSON.
        Bad(String),
    }

    fn json() -> impl Strategy<Value = serde_json::Value> {
        let leaf = prop_oneof![
            Just(serde_json::Value::Null),
            any::<bool>().prop_map(serde_json::Value::from),
            any::<i64>().prop_map(serde_json::Value::from),
            "\\PC{0,12}".prop_map(serde_json::Value::from),
        ];
        leaf.prop_recursive(3, 16, 4, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..4).prop_map(serde_json::Value::from),
                prop::collection::btree_map("[a-z\\PC]{0,6}", inner, 0..4)
                    .prop_map(|m| serde_json::Value::Object(m.into_iter().collect())),
            ]
        })
    }

    fn line() -> impl Strategy<Value = Line> {
        prop_oneof![
            6 => (json(), any::<bool>()).prop_map(|(v, pad)| Line::Json(v, pad)),
            1 => "[ \\t]{0,3}".prop_map(Line::Blank),
            // Cut JSON, stray words, a lone brace: never valid JSON, never blank.
            1 => prop_oneof![
                "\\{\"[a-z]{0,4}".prop_map(String::from),
                "[a-z]{1,6} [a-z]{1,6}".prop_map(String::from),
                Just("}".to_owned()),
            ]
            .prop_map(Line::Bad),
        ]
    }

    fn render(l: &Line) -> String {
        match l {
            Line::Json(v, false) => v.to_string(),
            Line::Json(v, true) => format!("  {v}\t"),
            Line::Blank(s) | Line::Bad(s) => s.clone(),
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(1000))]

        /// Any file: either every line that is not blank comes back, in order, as the same
        /// JSON, or the error names the first bad line; nothing panics.
        #[test]
        fn jsonl_reads_each_line_or_names_the_first_bad_one(
            lines in prop::collection::vec(line(), 0..12),
            crlf in any::<bool>(),
            last_newline in any::<bool>(),
        ) {
            let end = if crlf { "\r\n" } else { "\n" };
            let mut text = lines.iter().map(render).collect::<Vec<_>>().join(end);
            if last_newline {
                text.push_str(end);
            }
            let first_bad = lines.iter().position(|l| matches!(l, Line::Bad(_)));
            match (read_jsonl(text.as_bytes(), 1 << 20), first_bad) {
                (Ok(payloads), None) => {
                    let want: Vec<&serde_json::Value> = lines
                        .iter()
                        .filter_map(|l| match l { Line::Json(v, _) => Some(v), _ => None })
                        .collect();
                    prop_assert_eq!(payloads.len(), want.len());
                    for (p, v) in payloads.iter().zip(want) {
                        let back: serde_json::Value = serde_json::from_str(p.as_str()).unwrap();
                        prop_assert_eq!(&back, v);
                    }
                }
                (Err(e), Some(i)) => {
                    let msg = format!("{e:#}");
                    prop_assert!(msg.starts_with(&format!("line {}:", i + 1)), "{}", msg);
                }
                (got, want) => prop_assert!(false, "{:?} for first bad line {:?}", got.map(|p| p.len()), want),
            }
        }

        /// Bytes that are not UTF-8, or a line over the payload limit, name their line too.
        #[test]
        fn jsonl_names_a_line_that_is_not_text_or_too_long(
            good in 0usize..5,
            bytes in prop::collection::vec(any::<u8>(), 1..8),
        ) {
            let mut text = "{}\n".repeat(good).into_bytes();
            let mut bad = vec![0xff];
            bad.extend(bytes.iter().filter(|&&b| b != b'\n'));
            text.extend(&bad);
            let e = read_jsonl(&text[..], 1 << 20).unwrap_err();
            prop_assert!(format!("{e:#}").contains(&format!("line {}", good + 1)), "{:#}", e);
            let long = format!("{}\"{}\"\n", "{}\n".repeat(good), "x".repeat(64));
            let e = read_jsonl(long.as_bytes(), 32).unwrap_err();
            prop_assert!(format!("{e:#}").starts_with(&format!("line {}:", good + 1)), "{:#}", e);
        }
    }
}
