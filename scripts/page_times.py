#!/usr/bin/env python3
"""How long each dashboard page takes to render in Chromium with many jobs in the table (issue
45's target: every page within 500 ms): loads JOBS jobs over 20 queues (as
scripts/stats_scale.py does), starts `backlog serve` and a headless Chromium through
chromedriver (plain WebDriver over HTTP), signs in (the server runs without tokens: `local`),
then goes from page to page ROUNDS times, timing in the page each move from the address change
to the page drawn (the moment `#main` is replaced and marked with the page's name).

    scripts/page_times.py URL [JOBS] [ROUNDS]   # postgres://, mysql:// or sqlite://; 10000000 20

Needs the release build (`cargo build --release -p backlog-cli`), chromium and chromedriver,
and psql, mysql or sqlite3 on the PATH."""
import json
import pathlib
import statistics
import subprocess
import sys
import time
import urllib.request

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import stats_scale  # noqa: E402  (the loader and SQL helper)

root = pathlib.Path(__file__).resolve().parent.parent
backlog = str(root / "target/release/backlog")

MOVE = """
const [hash, page, done] = arguments;
const main = document.getElementById("main");
main.setAttribute("data-page", "moving");
const t0 = performance.now();
const seen = new MutationObserver(() => {
  if (main.getAttribute("data-page") === page) { seen.disconnect(); done(performance.now() - t0); }
});
seen.observe(main, { attributes: true });
location.hash = hash;
"""


def wd(base, method, path, body=None):
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(base + path, data=data, method=method,
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=120) as r:
        return json.loads(r.read())["value"]


def main():
    url = sys.argv[1]
    jobs = int(sys.argv[2]) if len(sys.argv) > 2 else 10_000_000
    rounds = int(sys.argv[3]) if len(sys.argv) > 3 else 20
    subprocess.run([backlog, "migrate", "--database-url", url], check=True, capture_output=True)
    stats_scale.load(url, jobs)
    job = stats_scale.sql(url, "SELECT MIN(id) FROM backlog_job WHERE queue = 'q3'")
    serve, base, port = stats_scale.serve(url)
    driver = subprocess.Popen(["chromedriver", f"--port={port + 1}"], stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL)
    wdb = f"http://127.0.0.1:{port + 1}"
    try:
        stats_scale.wait_up(wdb + "/status")
        caps = {"capabilities": {"alwaysMatch": {"goog:chromeOptions": {
            "binary": "/usr/bin/chromium",
            "args": ["--headless=new", "--no-sandbox", "--disable-gpu",
                     "--window-size=1400,1000"]}}}}
        sid = wd(wdb, "POST", "/session", caps)["sessionId"]
        s = f"/session/{sid}"
        # Start on the last page of the round, so that every move changes the address.
        wd(wdb, "POST", f"{s}/url", {"url": base + "/#/cron"})
        for _ in range(600):
            page = wd(wdb, "POST", f"{s}/execute/sync", {
                "script": "return document.getElementById('main').getAttribute('data-page')",
                "args": []})
            if page == "cron":
                break
            time.sleep(0.1)
        pages = [("#/", "overview"), ("#/queues/q3", "queue"), ("#/queues/q3/dead", "queue"),
                 (f"#/jobs/{job}", "job"), ("#/audit", "audit"), ("#/workers", "workers"),
                 ("#/cron", "cron")]
        took = {h: [] for h, _ in pages}
        for _ in range(rounds):
            for h, page in pages:
                ms = wd(wdb, "POST", f"{s}/execute/async", {"script": MOVE, "args": [h, page]})
                took[h].append(ms)
        wd(wdb, "DELETE", s)
        print(f"{jobs:,} jobs, 20 queues; each page {rounds} times, from the address change to "
              f"the page drawn:")
        for h, _ in pages:
            t = sorted(took[h])
            print(f"  {h:24} p50 {statistics.median(t):6.1f} ms   max {t[-1]:6.1f} ms")
    finally:
        driver.terminate()
        serve.terminate()
        driver.wait()
        serve.wait()


if __name__ == "__main__":
    main()
