#!/usr/bin/env python3
"""What a single enqueue costs MySQL/MariaDB when it must also write its count delta in its own
transaction (issue 45): one-row inserts from PRODUCERS threads at once, each on its own
connection, as
  plain      the INSERT alone, autocommit (one round trip: what backlog sends today),
  trigger    the INSERT alone into a copy of the table whose row trigger writes the delta,
  tx_alone   BEGIN, the INSERT, COMMIT (the round trips without the delta),
  two_alone  the INSERT and the delta INSERT, each in autocommit (two commits),
  tx         BEGIN, the INSERT, the delta INSERT, COMMIT (four round trips),
  procedure  CALL of a stored procedure doing those four inside the server (one round trip),
  coalesced  the producers hand their rows to one writer thread, which sends what has gathered
             while its last transaction ran as one transaction: BEGIN, one multi-row INSERT,
             one delta row, COMMIT (a process coalescing its concurrent single enqueues),
in alternating rounds on a scratch table shaped like backlog_job.

    scripts/count_proc_probe_mysql.py mysql://root@127.0.0.1:3307/probe [ROUNDS] [SECONDS] [PRODUCERS] [VARIANTS]
"""
import json
import pathlib
import statistics
import sys
import threading
import time

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
# The scratch tables and the connection of the trigger probe.
from count_trigger_probe_mysql import COUNT, TABLE, connect  # noqa: E402

SETUP = [
    "DROP PROCEDURE IF EXISTS penqueue",
    "DROP TABLE IF EXISTS pjob",
    "DROP TABLE IF EXISTS ptjob",
    "DROP TABLE IF EXISTS pcount",
    TABLE,
    COUNT,
    "CREATE TABLE ptjob LIKE pjob",
    """CREATE TRIGGER ptjob_counted AFTER INSERT ON ptjob FOR EACH ROW
    INSERT INTO pcount (queue, state, due, n) VALUES (NEW.queue, NEW.state, 0, 1)""",
    """CREATE PROCEDURE penqueue(IN q VARCHAR(128), IN at BIGINT, IN body JSON)
    BEGIN
        START TRANSACTION;
        INSERT INTO pjob (queue, run_at, payload) VALUES (q, at, body);
        SELECT LAST_INSERT_ID() AS id;
        INSERT INTO pcount (queue, state, due, n) VALUES (q, 'available', 0, 1);
        COMMIT;
    END""",
]


def producer(url, variant, stop, counts, i):
    conn = connect(url)
    c = conn.cursor()
    n = 0
    while not stop.is_set():
        now = int(time.time() * 1e6)
        if variant == "plain":
            c.execute("INSERT INTO pjob (queue, run_at, payload) VALUES (%s, %s, %s)",
                      ("q", now, '{"n": 1}'))
        elif variant == "trigger":
            c.execute("INSERT INTO ptjob (queue, run_at, payload) VALUES (%s, %s, %s)",
                      ("q", now, '{"n": 1}'))
        elif variant == "tx_alone":
            c.execute("BEGIN")
            c.execute("INSERT INTO pjob (queue, run_at, payload) VALUES (%s, %s, %s)",
                      ("q", now, '{"n": 1}'))
            c.execute("COMMIT")
        elif variant == "two_alone":
            c.execute("INSERT INTO pjob (queue, run_at, payload) VALUES (%s, %s, %s)",
                      ("q", now, '{"n": 1}'))
            c.execute("INSERT INTO pcount (queue, state, due, n) VALUES (%s, 'available', 0, 1)",
                      ("q",))
        elif variant == "tx":
            c.execute("BEGIN")
            c.execute("INSERT INTO pjob (queue, run_at, payload) VALUES (%s, %s, %s)",
                      ("q", now, '{"n": 1}'))
            c.execute("INSERT INTO pcount (queue, state, due, n) VALUES (%s, 'available', 0, 1)",
                      ("q",))
            c.execute("COMMIT")
        else:
            c.execute("CALL penqueue(%s, %s, %s)", ("q", now, '{"n": 1}'))
            c.fetchall()
            while c.nextset():
                pass
        n += 1
    counts[i] = n
    conn.close()


def coalesced(url, seconds, producers):
    import queue as q
    pending = q.Queue()
    stop = threading.Event()
    done = [0]

    def writer():
        conn = connect(url)
        c = conn.cursor()
        while not stop.is_set():
            try:
                first = pending.get(timeout=0.1)
            except q.Empty:
                continue
            batch = [first]
            while True:
                try:
                    batch.append(pending.get_nowait())
                except q.Empty:
                    break
            c.execute("BEGIN")
            c.execute("INSERT INTO pjob (queue, run_at, payload) VALUES "
                      + ", ".join(["(%s, %s, %s)"] * len(batch)),
                      [v for (row, _) in batch for v in row])
            c.execute("INSERT INTO pcount (queue, state, due, n) VALUES (%s, 'available', 0, %s)",
                      ("q", len(batch)))
            c.execute("COMMIT")
            for _, ev in batch:
                ev.set()
        conn.close()

    def producer(i):
        while not stop.is_set():
            ev = threading.Event()
            pending.put((("q", int(time.time() * 1e6), '{"n": 1}'), ev))
            while not ev.wait(0.1):
                if stop.is_set():
                    return
            done[0] += 1

    w = threading.Thread(target=writer)
    threads = [threading.Thread(target=producer, args=(i,)) for i in range(producers)]
    start = time.monotonic()
    w.start()
    for t in threads:
        t.start()
    time.sleep(seconds)
    stop.set()
    for t in threads + [w]:
        t.join()
    return done[0] / (time.monotonic() - start)


def run(url, variant, seconds, producers):
    if variant == "coalesced":
        return coalesced(url, seconds, producers)
    stop = threading.Event()
    counts = [0] * producers
    threads = [threading.Thread(target=producer, args=(url, variant, stop, counts, i))
               for i in range(producers)]
    start = time.monotonic()
    for t in threads:
        t.start()
    time.sleep(seconds)
    stop.set()
    for t in threads:
        t.join()
    return sum(counts) / (time.monotonic() - start)


def main():
    url = sys.argv[1]
    rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 4
    seconds = float(sys.argv[3]) if len(sys.argv) > 3 else 8
    producers = int(sys.argv[4]) if len(sys.argv) > 4 else 16
    conn = connect(url)
    variants = (sys.argv[5] if len(sys.argv) > 5 else "plain,tx,procedure").split(",")
    rates = {v: [] for v in variants}
    for r in range(rounds):
        for v in (variants if r % 2 == 0 else list(reversed(variants))):
            for stmt in SETUP:
                conn.cursor().execute(stmt)
            rates[v].append(run(url, v, seconds, producers))
            print(r, v, round(rates[v][-1]), file=sys.stderr)
    plain = statistics.median(rates[variants[0]])
    print(json.dumps({v: {"rates": [round(x) for x in rates[v]],
                          "median": round(statistics.median(rates[v])),
                          "against_plain": round(statistics.median(rates[v]) / plain, 3)}
                      for v in variants}, indent=1))


if __name__ == "__main__":
    main()
