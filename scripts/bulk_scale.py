#!/usr/bin/env python3
"""A bulk retry of many dead jobs beside a steady workload (issue 45's target: it completes, shows
progress, and claims' p99 stays within 20 ms): loads JOBS dead jobs into queue `bulk1m` by plain
SQL, starts `backlog serve` and a `backlog-bench --soak` (a producer at RATE jobs/s and a worker
on the soak's own queue, sampled every 10 s), and after a minute starts
`POST /api/v1/jobs/bulk {"action": "retry", "queue": "bulk1m", "state": "dead", "wait": false}`,
following its progress. Prints the soak's windows (enqueue-to-start p50/p99: each includes the
job's claim) marked before / during / after the bulk action, and the action's rate.

    scripts/bulk_scale.py URL [JOBS] [RATE] [SOAK]   # postgres:// or sqlite://; 1000000 1000 15m

Needs the release build (`cargo build --release -p backlog-cli -p backlog-bench`) and psql or
sqlite3 on the PATH. The soak must outlast the action (a minute before, the action, a minute
after); the script says so when it did not."""
import json
import pathlib
import subprocess
import sys
import tempfile
import time
import urllib.request

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import stats_scale  # noqa: E402  (`backlog serve`, started and waited for)

root = pathlib.Path(__file__).resolve().parent.parent
backlog = str(root / "target/release/backlog")
bench = str(root / "target/release/backlog-bench")
QUEUE = "bulk1m"


def sql(url, text):
    if url.startswith("sqlite://"):
        cmd = ["sqlite3", url[len("sqlite://"):], text]
    else:
        cmd = ["psql", url, "-v", "ON_ERROR_STOP=1", "-qAt", "-c", text]
    return subprocess.run(cmd, text=True, check=True, capture_output=True).stdout.strip()


def load(url, jobs):
    pg = not url.startswith("sqlite://")
    for table in ["backlog_job"] + (["backlog_job_done"] if pg else []):
        sql(url, f"DELETE FROM {table} WHERE queue = '{QUEUE}'")
    now = int(time.time() * 1_000_000)
    series = (f"generate_series(1, {jobs}) AS g(i)" if pg
              else f"(SELECT value AS i FROM generate_series(1, {jobs})) AS g")
    sql(url, f"INSERT INTO backlog_job (queue, payload, state, attempt, max_attempts, run_at, "
             f"created_at, finished_at) SELECT '{QUEUE}', '{{}}', 'dead', 1, 1, {now}, {now}, "
             f"{now} FROM {series}")


def call(base, method, path, body=None):
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(base + path, data=data, method=method,
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=30) as r:
        return json.loads(r.read())


def main():
    url = sys.argv[1]
    jobs = int(sys.argv[2]) if len(sys.argv) > 2 else 1_000_000
    rate = int(sys.argv[3]) if len(sys.argv) > 3 else 1000
    soak = sys.argv[4] if len(sys.argv) > 4 else "15m"
    subprocess.run([backlog, "migrate", "--database-url", url], check=True, capture_output=True)
    t = time.perf_counter()
    load(url, jobs)
    print(f"loaded {jobs:,} dead jobs into {QUEUE} in {time.perf_counter() - t:.0f} s", flush=True)
    serve, base, _ = stats_scale.serve(url)
    out = tempfile.NamedTemporaryFile(prefix="bulk_scale_", suffix=".json", delete=False)
    soaker = subprocess.Popen([bench, "--database-url", url, "--soak", soak, "--soak-rate",
                               str(rate), "--soak-window", "10s", "--soak-settle", "10s",
                               "--json"], stdout=out, stderr=subprocess.DEVNULL)
    started_at = time.time()
    try:
        time.sleep(60)
        begin = time.time() - started_at
        s = call(base, "POST", "/api/v1/jobs/bulk",
                 {"action": "retry", "queue": QUEUE, "state": "dead", "wait": False})
        last = 0.0
        while not s["done"]:
            time.sleep(1)
            s = call(base, "GET", f"/api/v1/jobs/bulk/{s['id']}")
            if time.time() - last >= 15:
                last = time.time()
                print(f"  {time.time() - started_at - begin:5.0f} s: seen {s['seen']:,}, "
                      f"changed {s['changed']:,}", flush=True)
        end = time.time() - started_at
        took = end - begin
        print(f"bulk retry: {s['changed']:,} of {s['seen']:,} changed in {took:.0f} s "
              f"({s['seen'] / took:,.0f} jobs/s), error: {s['error']}", flush=True)
        soaker.wait()
    finally:
        soaker.kill()
        serve.terminate()
        serve.wait()
    report = json.load(open(out.name))
    print(f"\nsoak at {rate} jobs/s, 10 s windows (enqueue to start, ms):")
    print("  at_s   phase    enqueued  completed  p50     p99")
    # The soak starts its clock a little after the process starts: at_s is near enough.
    for w in report["windows"]:
        at = w["at_s"]
        phase = "before" if at <= begin else ("during" if at - 10 < end else "after")
        p50, p99 = w["latency_p50_ms"], w["latency_p99_ms"]
        print(f"  {at:5.0f}  {phase:7}  {w['enqueued']:8}  {w['completed']:9}  "
              f"{p50 if p50 is None else round(p50, 1)!s:6}  {p99 if p99 is None else round(p99, 1)}")
    if report["windows"] and report["windows"][-1]["at_s"] < end + 10:
        print("the soak ended before the bulk action: give a longer SOAK")


if __name__ == "__main__":
    main()
