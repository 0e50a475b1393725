#!/usr/bin/env python3
"""What the counts the database keeps (schema version 19) cost the enqueue and the drain: runs
`backlog bench --json --rounds 3 --only enqueue,drain` against one database with the counting
triggers on and off in turn (PostgreSQL: DISABLE TRIGGER; MySQL/MariaDB: the triggers dropped
and made again from the migration), and prints each figure's median per side and the ratio.

    scripts/counts_ab.py URL [PAIRS]     # URL: postgres://… or mysql://…; PAIRS default 3

Needs the release build (`cargo build --release -p backlog-cli -p backlog-bench`), psql or
mysql on the PATH, and a database of its own: it changes the triggers of the one it is given."""
import json
import pathlib
import statistics
import subprocess
import sys
import urllib.parse

root = pathlib.Path(__file__).resolve().parent.parent
FIGURES = ["enqueue_single_per_s", "enqueue_batch_per_s", "e2e_jobs_per_s", "e2e_ratio"]
PG_TRIGGERS = [
    (table, f"{table}_count_{op}")
    for table in ["backlog_job", "backlog_job_done", "backlog_job_archive"]
    for op in ["insert", "update", "delete"]
]


def sql(url, text):
    u = urllib.parse.urlparse(url)
    if u.scheme.startswith("postgres"):
        cmd = ["psql", url, "-v", "ON_ERROR_STOP=1", "-qc", text]
    else:
        cmd = ["mysql", "-h", u.hostname, "-P", str(u.port or 3306), "-u", u.username or "root",
               u.path.lstrip("/")]
    subprocess.run(cmd, input=None if u.scheme.startswith("postgres") else text, text=True,
                   check=True)


def mysql_triggers():
    """The CREATE TRIGGER statements of the MySQL migration, as its runner splits them."""
    text = (root / "crates/backlog-sql/migrations/mysql/0019_counts.sql").read_text()
    out, cur, compound = [], [], False
    for line in text.split("\n"):
        t = line.strip()
        if not t or t.startswith("--"):
            continue
        cur.append(line)
        compound = compound or t == "BEGIN"
        if (t == "END;") if compound else t.endswith(";"):
            stmt = "\n".join(cur).rstrip().rstrip(";")
            if stmt.startswith("CREATE TRIGGER"):
                out.append(stmt)
            cur, compound = [], False
    return out


def counting(url, on):
    if urllib.parse.urlparse(url).scheme.startswith("postgres"):
        verb = "ENABLE" if on else "DISABLE"
        sql(url, "; ".join(f"ALTER TABLE {t} {verb} TRIGGER {n}" for t, n in PG_TRIGGERS))
        return
    names = [s.split()[2] for s in mysql_triggers()]
    sql(url, "".join(f"DROP TRIGGER IF EXISTS {n};\n" for n in names))
    if on:
        sql(url, "DELIMITER $$\n" + "".join(f"{s}$$\n" for s in mysql_triggers()))


def bench(url):
    out = subprocess.run(
        [str(root / "target/release/backlog"), "bench", "--database-url", url, "--json",
         "--rounds", "3", "--only", "enqueue,drain"],
        check=True, capture_output=True, text=True).stdout
    return json.loads(out)


def main():
    url = sys.argv[1]
    pairs = int(sys.argv[2]) if len(sys.argv) > 2 else 3
    runs = {True: [], False: []}
    bench(url)  # migrates, and warms the server's caches
    for i in range(pairs):
        for on in ([True, False] if i % 2 == 0 else [False, True]):
            counting(url, on)
            r = bench(url)
            runs[on].append(r)
            print(f"pair {i} counts {'on' if on else 'off'}: "
                  + ", ".join(f"{f} {r[f]:.2f}" for f in FIGURES), flush=True)
    counting(url, True)
    print(f"\nmedians of {pairs} run(s) a side:")
    for f in FIGURES:
        on = statistics.median(r[f] for r in runs[True])
        off = statistics.median(r[f] for r in runs[False])
        pair = statistics.median(a[f] / b[f] for a, b in zip(runs[True], runs[False]))
        print(f"  {f}: on {on:,.2f}, off {off:,.2f}, on/off {on / off:.3f} "
              f"(median of the pairs' ratios {pair:.3f})")


if __name__ == "__main__":
    main()
