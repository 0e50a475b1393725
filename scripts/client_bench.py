#!/usr/bin/env python3
"""The clients' figures of issue 48 on PostgreSQL, one sitting: for each of the Python, TypeScript
and Ruby clients, its batched enqueue (1,000 jobs a call) against the same rows sent as one plain
multi-row INSERT with the same driver, and its SQL worker draining JOBS no-op jobs in one
process; between the rounds, graphile-worker's own benchmark on the same server (the peer the
TypeScript client's drain stands beside). Each client's round runs on a database made and
migrated afresh (`backlog migrate`), so that no round walks another's dead rows. Writes the
results as JSON, which `scripts/benchmarks_md.py` shows in BENCHMARKS.md when the sitting's
`sitting.json` names the file (`"clients": "clients.json"`).

    scripts/client_bench.py [--rounds 3] [--jobs 100000] [--no-peer] OUT.json

Needs the release build of `backlog` (cargo build --release -p backlog-cli), Python with
psycopg, Node with clients/typescript's npm dependencies, Ruby with ruby-pg (scripts/services.sh),
and PostgreSQL on 127.0.0.1:5432 (trust).
"""
import argparse
import datetime
import json
import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SERVER = "postgres://postgres@127.0.0.1:5432"
BACKLOG = ROOT / "target" / "release" / "backlog"


def run(cmd, cwd=ROOT, env=None):
    done = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True)
    if done.returncode != 0:
        sys.exit(f"{' '.join(map(str, cmd))} failed:\n{done.stdout}\n{done.stderr}")
    return done.stdout


def fresh(name):
    """A new, migrated database; its URL."""
    run(["psql", f"{SERVER}/postgres", "-qc", f"DROP DATABASE IF EXISTS {name}"])
    run(["psql", f"{SERVER}/postgres", "-qc", f"CREATE DATABASE {name}"])
    url = f"{SERVER}/{name}"
    run([BACKLOG, "--database-url", url, "migrate"])
    return url


def number(pattern, text):
    m = re.search(pattern, text)
    if not m:
        sys.exit(f"no {pattern!r} in:\n{text}")
    return float(m.group(1).replace(",", ""))


def typescript(jobs):
    url = fresh("client_bench_ts")
    out = run(["node", "examples/bench.mjs", url, str(jobs)], cwd=ROOT / "clients/typescript")
    return {
        "enqueue_per_s": number(r"enqueueMany ([\d,]+) jobs/s", out),
        "enqueue_raw_per_s": number(r"raw multi-row INSERT (\d+) jobs/s", out),
        "enqueue_ratio": number(r"jobs/s: (\d+)%", out) / 100,
        "drain_per_s": number(r"drain: .* (\d+) jobs/s", out),
        "drain_settings": "a Worker, batch 1,000, concurrency 1,000",
    }


def ruby(jobs):
    lib = ["ruby", "-I", "clients/ruby/lib", "clients/ruby/examples/bench.rb"]
    url = fresh("client_bench_rb")
    enq = run(lib + ["enqueue", url, "50"])
    url = fresh("client_bench_rb")
    drain = run(lib + ["drain", url, str(jobs), "4", "100"])
    return {
        "enqueue_per_s": number(r"enqueue_many x1000: (\d+) jobs/s", enq),
        "enqueue_raw_per_s": number(r"raw multi-row INSERT: (\d+) jobs/s", enq),
        "enqueue_ratio": number(r"ratio ([\d.]+)", enq),
        "drain_per_s": number(r"s: (\d+) jobs/s", drain),
        "drain_settings": "a Backlog::Worker, 4 threads, batch 100",
    }


def python(jobs):
    url = fresh("client_bench_py")
    out = run(["/usr/bin/python3", "scripts/client_bench_python.py", url, "--jobs", str(jobs),
               "--runs", "1"])
    return {
        "enqueue_per_s": number(r"enqueue_many ([\d,]+) jobs/s", out),
        "enqueue_raw_per_s": number(r"multi-row INSERT ([\d,]+) jobs/s", out),
        "enqueue_ratio": number(r"jobs/s: (\d+)%", out) / 100,
        "drain_per_s": number(r"median of 1: ([\d,]+) jobs/s", out),
        "drain_settings": "a Consumer, batch 1,000",
    }


def peer():
    """One run of graphile-worker's benchmark: its drain rate (jobs/s)."""
    out = run(["bash", str(ROOT.parent / "shared/peers/graphile-worker/run.sh")],
              env={**os.environ, "REPS": "1"})
    return number(r"process .*rate=([\d.]+)", out)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("out")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--jobs", type=int, default=100_000)
    p.add_argument("--no-peer", action="store_true")
    a = p.parse_args()
    if not BACKLOG.exists():
        sys.exit(f"{BACKLOG} is missing: cargo build --release -p backlog-cli")
    load = os.getloadavg()[0]
    clients = {"Python": python, "TypeScript": typescript, "Ruby": ruby}
    results = {name: [] for name in clients}
    graphile = []
    for r in range(a.rounds):
        for name, bench in clients.items():
            results[name].append(bench(a.jobs))
            print(f"round {r + 1} {name}: {results[name][-1]}", file=sys.stderr)
        if not a.no_peer:
            graphile.append(peer())
            print(f"round {r + 1} graphile-worker drain: {graphile[-1]:.0f}/s", file=sys.stderr)
    build = run(["git", "rev-parse", "--short", "HEAD"]).strip()
    doc = {
        "date": datetime.date.today().isoformat(),
        "build": build,
        "command": f"scripts/client_bench.py --rounds {a.rounds} --jobs {a.jobs}"
                   + (" --no-peer" if a.no_peer else ""),
        "load_at_start": load,
        "jobs": a.jobs,
        "clients": results,
        "graphile_drain_per_s": graphile,
    }
    Path(a.out).write_text(json.dumps(doc, indent=2) + "\n")


if __name__ == "__main__":
    main()
