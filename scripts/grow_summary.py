#!/usr/bin/env python3
"""Markdown tables from `backlog bench --grow --json` reports, one per file.

    scripts/grow_summary.py grow.postgres.json grow.sqlite.json grow.mysql.json
"""
import json
import sys


def mib(b):
    return f"{b / 1048576:,.1f} MiB"


def main(paths):
    for path in paths:
        r = json.load(open(path))
        p = r["params"]
        print(f"**{p['backend']}**: drain of {p['drain_jobs']:,} jobs per round, {p['rounds']} rounds, "
              f"concurrency {p['concurrency']}\n")
        print("| jobs queued | drain (median of rounds) | rounds | table | indexes |")
        print("|---:|---:|---|---:|---:|")
        for lv in r["levels"]:
            rounds = ", ".join(f"{x:,.0f}" for x in lv["rounds_per_s"])
            s = lv["sizes"]
            print(f"| {lv['queued']:,} | {lv['jobs_per_s']:,.0f}/s | {rounds} | {mib(s['table_bytes'])} | {mib(s['index_bytes'])} |")
        print(f"\nDeepest against shallowest: {r['deepest_to_shallowest_ratio']:.0%}.\n")
        lr = r["long_run"]
        print(f"Steady run: {lr['secs']:.0f} s at {p['run_rate']:,}/s offered, {lr['jobs']:,} jobs "
              f"({lr['jobs_per_s']:,.0f}/s), completed jobs kept {p['keep_completed_ms']:,} ms then pruned.\n")
        print("| moment | rows | table | indexes |")
        print("|---|---:|---:|---:|")
        pts = [("before", lr["before"])] + [(f"after {(i + 1) * max(p['run_secs'] / 6, 0.5):.0f} s", s) for i, s in enumerate(lr["during"])] + [("end", lr["after"])]
        for name, s in pts:
            print(f"| {name} | {s['rows']:,} | {mib(s['table_bytes'])} | {mib(s['index_bytes'])} |")
        print()


if __name__ == "__main__":
    main(sys.argv[1:])
