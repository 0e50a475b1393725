#!/usr/bin/env python3
"""How long the operator's reads take with many jobs in the table (issue 45's targets): loads
JOBS jobs over 20 queues by plain SQL (the triggers of schema version 19 count them), starts
`backlog serve` on the database, and times GET /metrics, /api/v1/queues and /api/v1/stats
(REQUESTS each, one at a time) and `backlog stats --json` (whole command, 20 runs); then the
scan the counts replaced, once, for contrast.

    scripts/stats_scale.py URL [JOBS] [REQUESTS]   # postgres://, mysql:// or sqlite://; 10000000, 100

Needs the release build (`cargo build --release -p backlog-cli`), psql, mysql or sqlite3 on the
PATH, and
a database of its own (it adds jobs to it; `--keep` is not needed to run again: it loads only
up to JOBS)."""
import pathlib
import statistics
import subprocess
import sys
import time
import urllib.parse
import urllib.request

root = pathlib.Path(__file__).resolve().parent.parent
backlog = str(root / "target/release/backlog")
CHUNK = 500_000
# Job i goes to queue i % 20; one in 20 of each queue's jobs is in each of these states
# (chosen by i / 20), and the rest available: dead, completed, held, cancelled, and due an hour
# later.
STATE = ("CASE {g} % 20 WHEN 1 THEN 'dead' WHEN 2 THEN 'completed' WHEN 3 THEN 'held' "
         "WHEN 4 THEN 'cancelled' ELSE 'available' END")


def client(url):
    u = urllib.parse.urlparse(url)
    if u.scheme == "sqlite":
        return ["sqlite3", url[len("sqlite://"):]]
    if u.scheme.startswith("postgres"):
        return ["psql", url, "-v", "ON_ERROR_STOP=1", "-qAt"]
    return ["mysql", "-h", u.hostname, "-P", str(u.port or 3306), "-u", u.username or "root",
            "-N", u.path.lstrip("/")]


def sql(url, text):
    pg = urllib.parse.urlparse(url).scheme.startswith("postgres")
    if urllib.parse.urlparse(url).scheme == "sqlite":
        return subprocess.run(client(url) + [text], text=True, check=True,
                              capture_output=True).stdout.strip()
    cmd = client(url) + (["-c", text] if pg else [])
    return subprocess.run(cmd, input=None if pg else text, text=True, check=True,
                          capture_output=True).stdout.strip()


def load(url, jobs):
    scheme = urllib.parse.urlparse(url).scheme
    pg = scheme.startswith("postgres")
    have = int(sql(url, "SELECT COUNT(*) FROM backlog_job") or 0)
    now = int(time.time() * 1_000_000)
    for start in range(have, jobs, CHUNK):
        end = min(jobs, start + CHUNK)
        g = "(i / 20)" if pg or scheme == "sqlite" else "(i DIV 20)"
        run_at = f"CASE WHEN {g} % 20 = 5 THEN {now + 3_600_000_000} ELSE {now} END"
        if pg:
            rows = f"generate_series({start}, {end - 1}) AS g(i)"
            queue = "'q' || (i % 20)"
        elif scheme == "sqlite":
            rows = f"(SELECT value AS i FROM generate_series({start}, {end - 1})) AS g"
            queue = "'q' || (i % 20)"
        else:
            rows = f"(SELECT seq AS i FROM seq_{start}_to_{end - 1}) AS g"
            queue = "CONCAT('q', i % 20)"
        sql(url, f"INSERT INTO backlog_job (queue, payload, state, run_at, created_at, "
                 f"finished_at) SELECT {queue}, '{{}}', {STATE.format(g=g)}, {run_at}, {now}, "
                 f"CASE WHEN {g} % 20 IN (1, 2, 4) THEN {now} END FROM {rows}")
        print(f"loaded {end:,} jobs", flush=True)


def wait_up(url):
    """Waits until `url` answers (at most 20 s)."""
    for _ in range(200):
        try:
            urllib.request.urlopen(url, timeout=1).read()
            return
        except OSError:
            time.sleep(0.1)
    raise SystemExit(f"{url} did not come up")


def serve(url):
    """Starts `backlog serve` on the database, without tokens, and waits until it answers: the
    process, its base URL and its port (the next port is free for the caller's own use)."""
    port = 18000 + int(time.time()) % 1000
    proc = subprocess.Popen([backlog, "serve", "--database-url", url, "--listen",
                             f"127.0.0.1:{port}"], stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    base = f"http://127.0.0.1:{port}"
    wait_up(base + "/healthz")
    return proc, base, port


def timed(fn, n):
    took = []
    for _ in range(n):
        t = time.perf_counter()
        fn()
        took.append((time.perf_counter() - t) * 1000)
    took.sort()
    return statistics.median(took), took[min(len(took) - 1, int(len(took) * 0.99))]


def main():
    url = sys.argv[1]
    jobs = int(sys.argv[2]) if len(sys.argv) > 2 else 10_000_000
    requests = int(sys.argv[3]) if len(sys.argv) > 3 else 100
    subprocess.run([backlog, "migrate", "--database-url", url], check=True,
                   capture_output=True)
    load(url, jobs)
    server, base, _ = serve(url)
    try:
        print(f"\n{jobs:,} jobs, 20 queues; {requests} requests each, one at a time:")
        for path in ["/metrics", "/api/v1/queues", "/api/v1/stats"]:
            p50, p99 = timed(lambda: urllib.request.urlopen(base + path).read(), requests)
            print(f"  GET {path}: p50 {p50:.1f} ms, p99 {p99:.1f} ms")
    finally:
        server.terminate()
        server.wait()
    p50, p99 = timed(lambda: subprocess.run([backlog, "stats", "--json", "--database-url", url],
                                            check=True, capture_output=True), 20)
    print(f"  backlog stats --json (the whole command): p50 {p50:.1f} ms, p99 {p99:.1f} ms")
    scan = ("SELECT queue, state, COUNT(*) FROM backlog_job GROUP BY queue, state")
    p50, _ = timed(lambda: sql(url, scan), 1)
    print(f"  for contrast, the scan the counts replaced (one run, through the shell): "
          f"{p50:.0f} ms")


if __name__ == "__main__":
    main()
