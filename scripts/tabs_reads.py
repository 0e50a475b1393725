#!/usr/bin/env python3
"""Rows the database reads with dashboard tabs open against none (issue 45's target: five tabs
for ten minutes read no more than none, within 10%): loads JOBS jobs over 20 queues (as
scripts/stats_scale.py does), starts `backlog serve` and a steady workload
(`backlog-bench --soak` at RATE jobs/s), then counts the rows PostgreSQL reports read
(pg_stat_database: tup_returned + tup_fetched) over MINUTES with no tab open, and over MINUTES
with five headless Chromium windows open on five pages (overview, a queue, a job, the audit
log, the workers), each visible and refreshing.

    scripts/tabs_reads.py URL [JOBS] [RATE] [MINUTES]   # postgres:// ; 1000000 200 10

RATE 0 runs no workload: what the windows read then is theirs alone (with `backlog serve`'s).

Needs the release build (`cargo build --release -p backlog-cli -p backlog-bench`), psql and
chromium on the PATH, and a database of its own."""
import pathlib
import shutil
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import stats_scale  # noqa: E402  (the loader and psql helper)

root = pathlib.Path(__file__).resolve().parent.parent
backlog = str(root / "target/release/backlog")
bench = str(root / "target/release/backlog-bench")


def reads(url):
    db = url.rsplit("/", 1)[1]
    row = stats_scale.sql(url, "SELECT pg_stat_force_next_flush(); SELECT tup_returned + "
                               f"tup_fetched FROM pg_stat_database WHERE datname = '{db}'")
    return int(row.splitlines()[-1])


def phase(url, minutes, what):
    time.sleep(5)
    start = reads(url)
    time.sleep(minutes * 60)
    n = reads(url) - start
    print(f"  {what}: {n:,} rows read in {minutes} min ({n / minutes:,.0f} a minute)", flush=True)
    return n


def main():
    url = sys.argv[1]
    jobs = int(sys.argv[2]) if len(sys.argv) > 2 else 1_000_000
    rate = int(sys.argv[3]) if len(sys.argv) > 3 else 200
    minutes = int(sys.argv[4]) if len(sys.argv) > 4 else 10
    subprocess.run([backlog, "migrate", "--database-url", url], check=True, capture_output=True)
    stats_scale.load(url, jobs)
    job = stats_scale.sql(url, "SELECT min(id) FROM backlog_job WHERE queue = 'q3'")
    server, base, _ = stats_scale.serve(url)
    procs = [server] + ([] if rate == 0 else [
             subprocess.Popen([bench, "--database-url", url, "--soak", f"{2 * minutes + 3}m",
                               "--soak-rate", str(rate)], stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL)])
    dirs = []
    try:
        time.sleep(60)
        beside = f"a soak at {rate} jobs/s beside" if rate else "nothing else running"
        print(f"{jobs:,} jobs in 20 queues, {beside}:", flush=True)
        none = phase(url, minutes, "no tab open")
        for page in ["#/", "#/queues/q3", f"#/jobs/{job}", "#/audit", "#/workers"]:
            d = tempfile.mkdtemp(prefix="tabs_reads_")
            dirs.append(d)
            procs.append(subprocess.Popen(
                ["chromium", "--headless=new", "--no-sandbox", "--disable-gpu",
                 f"--user-data-dir={d}", "--window-size=1280,900", base + "/" + page],
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        five = phase(url, minutes, "five windows open")
        print(f"  five windows / none: {five / none:.3f} "
              f"({(five - none) / minutes:+,.0f} rows a minute)")
    finally:
        for p in procs:
            p.terminate()
        for p in procs:
            p.wait()
        for d in dirs:
            shutil.rmtree(d, ignore_errors=True)


if __name__ == "__main__":
    main()
