#!/usr/bin/env python3
"""The Python client's performance targets of issue 48, on PostgreSQL, in one process:

1. enqueue: `backlog_client.enqueue_many` of 1,000 jobs a call on the caller's psycopg
   connection (a commit after each call), against the same jobs sent as one multi-row
   `INSERT INTO backlog_job (queue, payload) VALUES (%s, %s::jsonb), …` with psycopg (target:
   the client at 80% or more of it). The two alternate, run by run.
2. drain: a `Consumer` with a no-op handler drains 100,000 jobs (target: 10,000 jobs/s).

Each figure is the median of --runs runs (3). Use a database of its own, migrated (`backlog
migrate`): the script writes to queues named bench_py_* and deletes their jobs afterwards (from
backlog_job and backlog_job_done), and vacuums backlog_job before each drain.

    PYTHONPATH=clients/python/src /usr/bin/python3 scripts/client_bench_python.py \\
        postgres://postgres@127.0.0.1:5432/py_bench
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import statistics
import sys
import time

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent / "clients" / "python" / "src"))

import psycopg  # noqa: E402

import backlog_client  # noqa: E402

CLIENT_Q, PLAIN_Q, DRAIN_Q = "bench_py_enqueue", "bench_py_insert", "bench_py_drain"


def forget(conn: psycopg.Connection, *queues: str) -> None:
    """Deletes the benchmark's own jobs, wherever they are kept."""
    for table in ("backlog_job", "backlog_job_done"):
        conn.execute(f"DELETE FROM {table} WHERE queue = ANY(%s)", (list(queues),))
    conn.commit()


def enqueue_run(url: str, calls: int, per_call: int, client_first: bool) -> tuple[float, float]:
    """Jobs a second of the client's enqueue_many and of the plain multi-row INSERT."""
    payloads = [[{"n": c * per_call + i, "to": "someone@example.com"} for i in range(per_call)]
                for c in range(calls)]
    jobs = [[{"queue": CLIENT_Q, "payload": p} for p in batch] for batch in payloads]
    sql = ("INSERT INTO backlog_job (queue, payload) VALUES "
           + ", ".join(["(%s, %s::jsonb)"] * per_call))
    with psycopg.connect(url) as conn:
        forget(conn, CLIENT_Q, PLAIN_Q)

        def client() -> float:
            started = time.perf_counter()
            for batch in jobs:
                ids = backlog_client.enqueue_many(conn, batch)
                conn.commit()
            took = time.perf_counter() - started
            assert len(ids) == per_call
            return calls * per_call / took

        def plain() -> float:
            started = time.perf_counter()
            for batch in payloads:
                values: list[object] = []
                for p in batch:
                    values += (PLAIN_Q, json.dumps(p))
                conn.execute(sql, values)
                conn.commit()
            return calls * per_call / (time.perf_counter() - started)

        # A first, untimed call of each: the connection's statements prepared, caches warm.
        backlog_client.enqueue_many(conn, jobs[0])
        conn.execute(sql, [v for p in payloads[0] for v in (PLAIN_Q, json.dumps(p))])
        conn.commit()
        if client_first:
            ours, theirs = client(), plain()
        else:
            theirs = plain()
            ours = client()
        forget(conn, CLIENT_Q, PLAIN_Q)
    return ours, theirs


def drain_run(url: str, n: int, batch: int, run: int) -> float:
    """Jobs a second of one Consumer draining `n` no-op jobs."""
    queue = f"{DRAIN_Q}_{run}"
    with psycopg.connect(url) as conn:
        forget(conn, queue)
        for at in range(0, n, 1000):
            backlog_client.enqueue_many(
                conn, [{"queue": queue, "payload": {"i": i}} for i in range(at, min(n, at + 1000))])
        conn.commit()
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("VACUUM (ANALYZE) backlog_job")
    done = 0

    def outcome(job: backlog_client.Job, what: str) -> None:
        nonlocal done
        done += what == "completed"

    with backlog_client.connect(url) as client:
        consumer = backlog_client.Consumer(client, queue, lambda job: None, batch=batch,
                                           on_outcome=outcome)
        started = time.perf_counter()
        consumer.run(drain=True)
        took = time.perf_counter() - started
    if done != n:
        raise SystemExit(f"drain: {done} of {n} jobs completed")
    with psycopg.connect(url) as conn:
        forget(conn, queue)
    return n / took


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("url", help="postgres://… of a migrated database of its own")
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--calls", type=int, default=20, help="enqueue calls a run (1,000 jobs each)")
    p.add_argument("--jobs", type=int, default=100_000, help="jobs the consumer drains a run")
    p.add_argument("--batch", type=int, default=1000, help="the consumer's claim batch")
    p.add_argument("--skip-drain", action="store_true")
    a = p.parse_args()
    if not a.url.startswith(("postgres://", "postgresql://")):
        raise SystemExit("a postgres:// URL: the targets are PostgreSQL's")
    backlog_client.connect(a.url).close()  # SchemaMissing / SchemaTooOld before anything runs

    print(f"load average at start: {os.getloadavg()[0]:.2f} (1 min), {os.cpu_count()} CPUs; "
          f"psycopg {psycopg.__version__} ({psycopg.pq.__impl__}), Python "
          f"{sys.version.split()[0]}", flush=True)
    ours, theirs = [], []
    for run in range(a.runs):
        o, t = enqueue_run(a.url, a.calls, 1000, client_first=run % 2 == 0)
        ours.append(o)
        theirs.append(t)
        print(f"  enqueue run {run + 1}: client {o:,.0f} jobs/s, plain INSERT {t:,.0f} jobs/s",
              flush=True)
    mo, mt = statistics.median(ours), statistics.median(theirs)
    print(f"enqueue, 1,000 jobs a call, {a.calls} calls a run, medians of {a.runs}: "
          f"enqueue_many {mo:,.0f} jobs/s, multi-row INSERT {mt:,.0f} jobs/s: "
          f"{100 * mo / mt:.0f}% (target 80%)", flush=True)
    if not a.skip_drain:
        rates = []
        for run in range(a.runs):
            rate = drain_run(a.url, a.jobs, a.batch, run)
            rates.append(rate)
            print(f"  drain run {run + 1}: {rate:,.0f} jobs/s", flush=True)
        print(f"drain, {a.jobs:,} no-op jobs, one Consumer, batch {a.batch}, median of {a.runs}: "
              f"{statistics.median(rates):,.0f} jobs/s (target 10,000)")
    print(f"load average at end: {os.getloadavg()[0]:.2f} (1 min)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
