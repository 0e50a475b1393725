#!/usr/bin/env python3
"""What a row trigger that counts plain-SQL inserts costs MySQL/MariaDB (issue 45).

backlog's own statements are to write their count deltas themselves, one row per transaction;
a plain-SQL producer's INSERT still has to be counted, and only a trigger can do that. This
measures, on a scratch table shaped like backlog_job, inserts with
  none     no trigger,
  skipped  an AFTER INSERT row trigger whose body is skipped (the session set @backlog_counted,
           as backlog's own connections would),
  counted  the same trigger writing a delta row per inserted row (a plain-SQL producer),
in alternating rounds, for one-row inserts (autocommit) and 1,000-row inserts.

    scripts/count_trigger_probe_mysql.py mysql://root@127.0.0.1:3307/probe [ROUNDS] [SECONDS]
"""
import json
import statistics
import sys
import time
import urllib.parse

import pymysql

TABLE = """
CREATE TABLE pjob (
    id BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY,
    queue VARCHAR(128) NOT NULL,
    state VARCHAR(16) NOT NULL DEFAULT 'available',
    run_at BIGINT NOT NULL,
    attempt INT NOT NULL DEFAULT 0,
    payload JSON NOT NULL,
    KEY pjob_claim (queue, state, run_at, id)
) ENGINE = InnoDB"""
COUNT = """
CREATE TABLE pcount (
    id BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY,
    queue VARCHAR(128) NOT NULL,
    state VARCHAR(16) NOT NULL,
    due BIGINT NOT NULL,
    n BIGINT NOT NULL
) ENGINE = InnoDB"""
TRIGGER = """
CREATE TRIGGER pjob_counted AFTER INSERT ON pjob FOR EACH ROW
BEGIN
    IF @backlog_counted IS NULL THEN
        INSERT INTO pcount (queue, state, due, n)
        VALUES (NEW.queue,
                CASE WHEN NEW.state = 'available' AND NEW.run_at DIV 1000000 * 1000000
                          > UNIX_TIMESTAMP(NOW(6)) * 1000000
                     THEN IF(NEW.attempt = 0, 'scheduled', 'retrying') ELSE NEW.state END,
                CASE WHEN NEW.state = 'available' AND NEW.run_at DIV 1000000 * 1000000
                          > UNIX_TIMESTAMP(NOW(6)) * 1000000
                     THEN NEW.run_at DIV 1000000 * 1000000 ELSE 0 END,
                1);
    END IF;
END"""


def connect(url):
    u = urllib.parse.urlparse(url)
    return pymysql.connect(host=u.hostname, port=u.port or 3306, user=u.username or "root",
                           password=u.password or "", database=u.path.lstrip("/"),
                           autocommit=True)


def setup(conn, variant):
    c = conn.cursor()
    c.execute("DROP TABLE IF EXISTS pjob")
    c.execute("DROP TABLE IF EXISTS pcount")
    c.execute(TABLE)
    c.execute(COUNT)
    if variant != "none":
        c.execute(TRIGGER)
    c.execute("SET @backlog_counted = " + ("1" if variant == "skipped" else "NULL"))


def run(conn, shape, seconds):
    c = conn.cursor()
    now = int(time.time() * 1e6)
    one = ("q", now, '{"n": 1}')
    rows = 1 if shape == "single" else 1000
    sql = "INSERT INTO pjob (queue, run_at, payload) VALUES " + ", ".join(["(%s, %s, %s)"] * rows)
    args = one * rows
    done, start = 0, time.monotonic()
    while time.monotonic() - start < seconds:
        if rows > 1:
            c.execute("START TRANSACTION")
        c.execute(sql, args)
        if rows > 1:
            c.execute("COMMIT")
        done += rows
    return done / (time.monotonic() - start)


def main():
    url = sys.argv[1]
    rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 4
    seconds = float(sys.argv[3]) if len(sys.argv) > 3 else 8
    conn = connect(url)
    variants = ["none", "skipped", "counted"]
    out = {}
    for shape in ("single", "batch"):
        rates = {v: [] for v in variants}
        for r in range(rounds):
            order = variants if r % 2 == 0 else list(reversed(variants))
            for v in order:
                setup(conn, v)
                rates[v].append(run(conn, shape, seconds))
        none = statistics.median(rates["none"])
        out[shape] = {v: {"rates": [round(x) for x in rates[v]],
                          "median": round(statistics.median(rates[v])),
                          "against_none": round(statistics.median(rates[v]) / none, 3)}
                      for v in variants}
        print(shape, json.dumps(out[shape]), file=sys.stderr)
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
