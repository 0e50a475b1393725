#!/usr/bin/env python3
"""Writes BENCHMARKS.md from one sitting's data: what `backlog bench --json` printed for each
backend, and the peers' result lines, all measured in the same sitting.

    scripts/benchmarks_md.py docs/bench-data/2026-11-28            # prints it
    scripts/benchmarks_md.py docs/bench-data/2026-11-28 --write    # writes BENCHMARKS.md
    scripts/benchmarks_md.py --check                               # the same, for the newest sitting

The sitting's folder holds `sitting.json` (date, build, machine, servers, and each run: its
label, command and JSON files; each peer: its command and result file) beside those files. A
run of several files (the same command run again) shows the median of the files and each file's
value; each file's own figures are already medians of its rounds, its ratios the median of each
round's own ratio. Nothing here is measured or typed by hand: a figure not in the JSON is not in
the document.
"""
import json
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

# (figure, backlog's key, bare SQL's key, ratio key, unit)
PAIRED = [
    ("enqueue, single (producers at once)", "enqueue_single_per_s", "enqueue_single_baseline_per_s",
     "enqueue_single_ratio"),
    ("enqueue, batched", "enqueue_batch_per_s", "enqueue_batch_baseline_per_s",
     "enqueue_batch_ratio"),
    ("drain of no-op jobs", "e2e_jobs_per_s", "baseline_jobs_per_s", "e2e_ratio"),
    ("drain, against two statements a batch", "e2e_jobs_per_s",
     "baseline_two_statements_jobs_per_s", "e2e_two_statements_ratio"),
    ("HTTP: batched enqueue, against the library", "http_enqueue_batch_per_s",
     "http_enqueue_batch_library_per_s", "http_enqueue_batch_ratio"),
    ("HTTP: claim and complete, against the library", "http_drain_per_s",
     "http_drain_library_per_s", "http_drain_ratio"),
]
# (figure, key, unit)
SOLO = [
    ("drain, this process's CPU per job", "e2e_client_cpu_us_per_job", " µs"),
    ("drain, bare SQL's CPU per job", "baseline_client_cpu_us_per_job", " µs"),
    ("drain, log bytes per job (WAL, redo)", "e2e_log_bytes_per_job", " B"),
    ("steady producer, end to end", "e2e_steady_jobs_per_s", "/s"),
    ("enqueue to handler start, p50", "latency_p50_ms", " ms"),
    ("enqueue to handler start, p99", "latency_p99_ms", " ms"),
    ("S2 (many slow jobs): claim to completion, mean", "s2_mean_ms", " ms"),
    ("S2: claim to completion, p99", "s2_p99_ms", " ms"),
    ("HTTP: job show during a drain, p50", "http_show_p50_ms", " ms"),
    ("HTTP: job show during a drain, p99", "http_show_p99_ms", " ms"),
]

HEAD = """# Benchmarks

The current figures of backlog on this project's machine: each beside the same work written as
bare SQL on the same database, and on PostgreSQL beside graphile-worker, the fastest peer
measured here, all in one sitting. Generated from the JSON that `backlog bench --json` printed
(`scripts/benchmarks_md.py {folder} --write`); do not edit by hand, measure again. How the
figures got here, sitting by sitting, and the long runs not repeated in this sitting (cost as
work grows, flow control, many processes, soaks): [`docs/bench-journal/`](docs/bench-journal/README.md).
Soaks: [`SOAK.md`](SOAK.md).

The machine is noisy (2 cores shared with the database), so read ratios taken in the same run,
not absolute rates across sittings.
"""

MEASURED = """## What is measured

`backlog bench` (the `backlog-bench` binary) runs each phase in rounds that alternate which side
goes first; rates are medians over the rounds, ratios the median of each round's own ratio.

- **enqueue, single**: jobs enqueued one call at a time by concurrent producers, beside single-row
  `INSERT`s from as many connections.
- **enqueue, batched**: `Client::enqueue_many` of 1,000 jobs a call, beside multi-row `INSERT`s.
- **drain**: a queue of no-op jobs drained by one `Worker` (the library's defaults for claim size
  and claim loops unless the command sets them), beside the fastest bare-SQL loop the database
  has for the same work: a batch claimed under a lease and deleted by the statement that claims the
  next, or (PostgreSQL, MariaDB) locked and deleted in one transaction, each tried with 2, 4 and 8
  loops; the fastest is the baseline. Every drain starts from a checkpoint.
- **steady**: a producer enqueuing while the runtime works; **latency**: enqueue to handler start
  at a steady rate; **S2**: many one-second jobs at once, claim to completion.
- **HTTP**: `backlog serve`'s API beside the library, 4 clients each.
- **graphile-worker**: `../shared/peers/graphile-worker/run.sh` (its own performance test's
  settings: 2 processes of 24 jobs at once), alternating with backlog in the same sitting.
"""


def fmt(v, unit):
    if v is None:
        return "—"
    if unit == "/s":
        return f"{v:,.0f}/s"
    if unit == " B":
        return f"{v:,.0f} B"
    return f"{v:,.1f}{unit}" if v < 100 else f"{v:,.0f}{unit}"


def med(values):
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else None


def per_run(runs, key, show):
    if len(runs) < 2:
        return ""
    return " (" + ", ".join(show(r.get(key)) for r in runs) + ")"


def pct(v):
    return "—" if v is None else f"{v:.2f}×"


def run_table(run, runs):
    p = runs[0]["params"]
    out = [f"### {run['label']}", ""]
    out.append(f"`{run['command']}` — {len(runs)} run(s) of {p['rounds']} round(s); concurrency "
               f"{p['concurrency']}, {p['shards']} shard(s), {p['batch_jobs']:,} jobs drained, "
               f"{p['single_jobs']:,} single enqueues from {p['producers']} producers, "
               f"batches of {p['batch_size']:,}.")
    if run.get("note"):
        out.append("")
        out.append(run["note"])
    out.append("")
    out.append("| figure | backlog | bare SQL | backlog ÷ bare |")
    out.append("|---|---:|---:|---:|")
    for name, ours, base, ratio in PAIRED:
        o, b, r = (med(x.get(k) for x in runs) for k in (ours, base, ratio))
        if o is None:
            continue
        against = "library" if name.startswith("HTTP") else "bare"
        out.append(f"| {name} | {fmt(o, '/s')} | {fmt(b, '/s')}"
                   f"{' (the library)' if against == 'library' else ''} | {pct(r)}"
                   f"{per_run(runs, ratio, pct)} |")
    for name, key, unit in SOLO:
        v = med(x.get(key) for x in runs)
        if v is None:
            continue
        out.append(f"| {name} | {fmt(v, unit)}{per_run(runs, key, lambda x: fmt(x, unit))} | | |")
    out.append("")
    return out


def peer_rates(path):
    """graphile-worker's RESULT lines: each figure's rates, one per repetition."""
    rates = {}
    for line in Path(path).read_text().splitlines():
        words = line.split()
        if "run=" not in line:
            continue
        fields = dict(w.split("=", 1) for w in words if "=" in w)
        kind = next(w for w in words if w in ("enqueue_single", "enqueue_bulk", "process"))
        rates.setdefault(kind, []).append(float(fields["rate"]))
    return rates


# The targets the figures answer to, each a peer ratio: (what, run label, figure key, peer
# figure, at least).
TARGETS = [
    ("drain at the bench defaults (one process, concurrency 100, one shard), against graphile-worker",
     "PostgreSQL, the defaults", "e2e_jobs_per_s", "process", 1.5),
    ("drain tuned (`--concurrency 500 --shards 16`), against graphile-worker",
     "PostgreSQL, tuned", "e2e_jobs_per_s", "process", 3.0),
]


def targets_table(sitting, folder, runs_by_label):
    peer = sitting.get("peers", [None])[0]
    if peer is None:
        return []
    rates = peer_rates(folder / peer["file"])
    out = ["## Against the targets", "",
           "| target | wanted | measured | met |", "|---|---:|---:|---|"]
    for what, label, key, kind, least in TARGETS:
        runs = runs_by_label.get(label)
        theirs = med(rates.get(kind, []))
        ours = med(r.get(key) for r in runs) if runs else None
        if ours is None or theirs is None:
            continue
        ratio = ours / theirs
        out.append(f"| {what} | ≥ {least:.1f}× | {ratio:.2f}× | {'yes' if ratio >= least else 'no'} |")
    out.append("")
    return out


def peer_table(sitting, folder, runs_by_label):
    out = []
    for peer in sitting.get("peers", []):
        rates = peer_rates(folder / peer["file"])
        out += [f"## Beside {peer['name']}", "",
                f"`{peer['command']}`, {len(rates.get('process', []))} run(s), alternating with the "
                "backlog runs below on the same server. Rates are medians of the runs; the "
                "ratio is backlog's median over the peer's.", "",
                "| figure | " + peer["name"] + " | " +
                " | ".join(b["label"] for b in peer["beside"]) + " |",
                "|---|---:|" + "---:|" * len(peer["beside"])]
        for name, kind, key in [("drain of no-op jobs", "process", "e2e_jobs_per_s"),
                                ("enqueue, batched (1,000 a call)", "enqueue_bulk",
                                 "enqueue_batch_per_s"),
                                ("enqueue, single (16 producers)", "enqueue_single",
                                 "enqueue_single_per_s")]:
            theirs = med(rates.get(kind, []))
            cells = []
            for b in peer["beside"]:
                ours = med(r.get(key) for r in runs_by_label[b["label"]])
                cells.append("—" if ours is None or theirs is None
                             else f"{ours:,.0f}/s ({ours / theirs:.2f}×)")
            out.append(f"| {name} | {fmt(theirs, '/s')} | " + " | ".join(cells) + " |")
        out.append("")
    return out


# Issue 48's targets for each client: (batched enqueue against the raw INSERT, drain jobs/s).
CLIENT_TARGETS = {"Python": (0.8, 10_000), "TypeScript": (0.8, 20_000), "Ruby": (0.8, 10_000)}


def clients_table(sitting, folder):
    """The clients' figures (scripts/client_bench.py), when the sitting has them."""
    if "clients" not in sitting:
        return []
    data = json.loads((folder / sitting["clients"]).read_text())
    peer = med(data.get("graphile_drain_per_s", []))
    out = ["## The clients", "",
           f"`{data['command']}` (build `{data['build']}`, {data['date']}; load "
           f"{data['load_at_start']:.1f} at its start): each client of `clients/` on PostgreSQL, "
           f"one process, {len(next(iter(data['clients'].values())))} round(s) alternating "
           "with graphile-worker's own benchmark. Medians of the rounds; the enqueue ratio is "
           "each round's batched enqueue (1,000 jobs a call) over the same rows sent as one plain "
           "multi-row INSERT with the same driver, the drain "
           f"{data['jobs']:,} no-op jobs by the client's SQL worker.", "",
           "| client | batched enqueue | against the raw INSERT (wanted ≥) | drain (wanted ≥) "
           "| drain against graphile-worker | drained by |",
           "|---|---:|---:|---:|---:|---|"]
    for name, rounds in data["clients"].items():
        least, floor = CLIENT_TARGETS[name]
        enq = med(r["enqueue_per_s"] for r in rounds)
        ratio = med(r["enqueue_ratio"] for r in rounds)
        drain = med(r["drain_per_s"] for r in rounds)
        versus = "—" if peer is None else f"{drain / peer:.2f}×"
        out.append(f"| {name} | {enq:,.0f}/s | {ratio:.2f} ({least:.2f}) "
                   f"| {drain:,.0f}/s ({floor:,}) | {versus} | {rounds[0].get('drain_settings', '')} |")
    if peer is not None:
        out += ["", f"graphile-worker's drain in the same sitting: {peer:,.0f} jobs/s (its own "
                "benchmark: two worker processes, concurrency 24 each)."]
    out.append("")
    return out


def render(folder):
    folder = Path(folder)
    sitting = json.loads((folder / "sitting.json").read_text())
    rel = folder.resolve().relative_to(ROOT)
    out = HEAD.format(folder=rel).splitlines()
    out += ["", "## The sitting", "",
            f"- **Date and build**: {sitting['date']}, commit `{sitting['build']}` "
            f"({sitting['profile']}).",
            f"- **Machine**: {sitting['machine']}"]
    for name, text in sitting["servers"].items():
        out.append(f"- **{name}**: {text}")
    out.append(f"- **Data**: [`{rel}/`]({rel}/) (the JSON of every run, and the peer's output).")
    out.append("")
    runs_by_label = {}
    for run in sitting["runs"]:
        runs_by_label[run["label"]] = [json.loads((folder / f).read_text()) for f in run["files"]]
    out += targets_table(sitting, folder, runs_by_label)
    out += peer_table(sitting, folder, runs_by_label)
    out += clients_table(sitting, folder)
    for backend in sitting["order"]:
        out += [f"## {backend}", ""]
        for run in sitting["runs"]:
            if run["backend"] == backend:
                out += run_table(run, runs_by_label[run["label"]])
    out += MEASURED.splitlines()
    return "\n".join(out).rstrip("\n") + "\n"


def main(args):
    if args == ["--check"]:
        args = [str(max((ROOT / "docs/bench-data").iterdir())), "--check"]
    if not args or args[0].startswith("--"):
        sys.exit(__doc__)
    text = render(args[0])
    target = ROOT / "BENCHMARKS.md"
    if "--write" in args:
        target.write_text(text)
    elif "--check" in args:
        if target.read_text() != text:
            sys.exit(f"BENCHMARKS.md is not what {args[0]} gives: run "
                     f"scripts/benchmarks_md.py {args[0]} --write")
    else:
        sys.stdout.write(text)


if __name__ == "__main__":
    main(sys.argv[1:])
