#!/usr/bin/env python3
"""Medians across runs of `backlog bench --json`: one markdown table per backend.

    scripts/bench_summary.py full.postgres.*.json

Each run's own figures are already medians of its rounds, and its ratios the median of each
round's own ratio; this takes the median of the runs, and lists each run's value beside it.
"""
import json
import statistics
import sys

ROWS = [
    ("enqueue, single (16 producers)", "enqueue_single_per_s", "enqueue_single_baseline_per_s",
     "enqueue_single_ratio"),
    ("enqueue, batched (1000 per call)", "enqueue_batch_per_s", "enqueue_batch_baseline_per_s",
     "enqueue_batch_ratio"),
    ("drain of 100k no-op jobs", "e2e_jobs_per_s", "baseline_jobs_per_s", "e2e_ratio"),
    ("drain, against two statements a batch", "e2e_jobs_per_s",
     "baseline_two_statements_jobs_per_s", "e2e_two_statements_ratio"),
]
CPU = [
    ("enqueue, batched, this process's CPU per job",
     ("enqueue_batch_client_cpu_us_per_job", "enqueue_batch_baseline_client_cpu_us_per_job"), 2),
    ("drain, this process's CPU per job",
     ("e2e_client_cpu_us_per_job", "baseline_client_cpu_us_per_job"), 1),
]
SOLO = [
    ("steady producer, end to end", "e2e_steady_jobs_per_s", "/s"),
    ("enqueue to handler start, p50", "latency_p50_ms", " ms"),
    ("enqueue to handler start, p99", "latency_p99_ms", " ms"),
    ("S2: claim to completion, mean", "s2_mean_ms", " ms"),
    ("S2: claim to completion, p99", "s2_p99_ms", " ms"),
]


def fmt(v, unit):
    return f"{v:,.0f}{unit}" if unit == "/s" else f"{v:,.1f}{unit}"


def main(paths):
    runs = [json.load(open(p)) for p in paths]
    backend = runs[0]["params"]["backend"]
    print(f"**{backend}**, {len(runs)} runs\n")
    print("| figure | backlog (median) | bare SQL (median) | ratio (median of runs) | ratio per run |")
    print("|---|---:|---:|---:|---|")
    for name, ours, base, ratio in ROWS:
        unit = "/s"
        if any(r[ours] is None or r[base] is None for r in runs):
            continue  # a phase left out by --only
        o = statistics.median(r[ours] for r in runs)
        b = statistics.median(r[base] for r in runs)
        ratios = [r[ratio] for r in runs]
        per = ", ".join(f"{x:.0%}" for x in ratios)
        print(f"| {name} | {fmt(o, unit)} | {fmt(b, unit)} | {statistics.median(ratios):.0%} | {per} |")
    # This process's CPU per job in the batched enqueue and the drains (on SQLite the database
    # runs in it too).
    for name, cpu, digits in CPU:
        if all(r.get(k) is not None for r in runs for k in cpu):
            o, b = (statistics.median(r[k] for r in runs) for k in cpu)
            per = ", ".join(f"{r[cpu[0]]:.{digits}f}/{r[cpu[1]]:.{digits}f}" for r in runs)
            print(f"| {name} | {o:.{digits}f} µs | {b:.{digits}f} µs | | {per} µs |")
    for name, key, unit in SOLO:
        if any(r[key] is None for r in runs):
            continue
        v = statistics.median(r[key] for r in runs)
        per = ", ".join(fmt(r[key], unit) for r in runs)
        print(f"| {name} | {fmt(v, unit)} | | | {per} |")
    print()


if __name__ == "__main__":
    main(sys.argv[1:])
