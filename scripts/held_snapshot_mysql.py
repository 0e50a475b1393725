#!/usr/bin/env python3
"""Bare SQL on MariaDB/MySQL: what a claim costs while another session holds an old consistent
snapshot (issue 43, step 1). The MariaDB half of scripts/held_snapshot_pg.py; no Rust.

    /usr/bin/python3 scripts/held_snapshot_mysql.py run [DESIGN:MODE ...]   # claim cost vs jobs completed
    /usr/bin/python3 scripts/held_snapshot_mysql.py hotrow [UPDATES]        # one row updated N times
    /usr/bin/python3 scripts/held_snapshot_mysql.py locks                   # which held sessions block TRUNCATE
    /usr/bin/python3 scripts/held_snapshot_mysql.py drop                    # drop the database

Environment: MYSQL_HOST (127.0.0.1), MYSQL_PORT (3306), JOBS (200000 completed per run), BATCH
(100 jobs a claim), CHECKPOINTS (1000,50000,100000,200000). Everything lives in the database
`snapresearch` (made and dropped here), as root without a password. Needs PyMySQL (Debian:
python3-pymysql). Worker connections run in READ COMMITTED, as backlog's own.

`run`: the same steady load as the PostgreSQL script, in one session: 1,000 jobs queued ahead;
each step enqueues 1,000 jobs (one INSERT), claims them BATCH at a time (BEGIN; SELECT ... FOR
UPDATE SKIP LOCKED; the claim's writes; COMMIT) and completes each claim in a transaction of its
own. What a claim costs is measured three ways, since InnoDB keeps no per-session page counter:
  pages     r_engine_stats.pages_accessed of the claim's SELECT by ANALYZE FORMAT=JSON (rolled
            back), at each checkpoint: the pages the locking read touched, delete-marked records
            it stepped over included.
  bp_reads  the global Innodb_buffer_pool_read_requests before and after each claim transaction
            (mean of the last 20 claims): the whole claim, its writes included; global, so
            another client of the server would show up in it (nothing else ran during the runs
            reported).
  handler   the session's Handler_read_key + Handler_read_next for the claim: rows InnoDB handed
            to the server. Delete-marked records skipped inside InnoDB are not counted: this one
            does not see the walk (shown to make the point).
plus ms per claim (mean of the last 20), the InnoDB history list length (undo not yet purged) and
the design's tablespace files' size.

Designs (as in the PostgreSQL script):
  today    backlog's table (claim index (queue, state, shard, priority, run_at, id), lease index
           (state, lease_expires_at), unique (queue, unique_active), group (queue, group_key, id));
           the claim locks the head of the claim index and UPDATEs state and lease; completion
           DELETEs, fenced by the token.
  cursor   today's table and writes; the claim's range starts past the last key this client
           claimed: (priority, run_at, id) > cursor. "full" is the claim from the head.
  ring     8 tables like today's, a slot each; new jobs go to the current slot (10,000 jobs a
           slot); claims take the live slots oldest first; a slot that is not current and has no
           row is emptied with TRUNCATE TABLE ... NOWAIT (skipped on a lock wait).
  ringlog  8 slots of three insert-only tables: job (never updated or deleted), lease (one row
           per claimed job: INSERT IGNORE, its primary key the job row's), done (the completion
           inserts it, fenced by the lease's token). The claim starts past the slot's largest
           claimed key (one descent of the lease table's cursor index). A slot is emptied
           (TRUNCATE of its three tables, NOWAIT) once every job row has a done row.
Modes:
  free     no held snapshot (InnoDB purge runs on its own).
  held     another session: START TRANSACTION WITH CONSISTENT SNAPSHOT and a SELECT of every job
           table of the design (so it holds their metadata locks, as mysqldump
           --single-transaction or a report on the job table does).
  foreign  another session: START TRANSACTION WITH CONSISTENT SNAPSHOT and a SELECT of an
           unrelated table only.
"""
import json
import os
import random
import statistics
import sys
import threading
import time

import pymysql

HOST = os.environ.get("MYSQL_HOST", "127.0.0.1")
PORT = int(os.environ.get("MYSQL_PORT", "3306"))
DB = "snapresearch"
JOBS = int(os.environ.get("JOBS", "200000"))
BATCH = int(os.environ.get("BATCH", "100"))
STEP = 1000
SLOTS = 8
SLOT_JOBS = 10000
CHECKPOINTS = [int(x) for x in os.environ.get("CHECKPOINTS", "1000,50000,100000,200000").split(",")]


def connect(db=DB, rc=True):
    init = "SET SESSION TRANSACTION ISOLATION LEVEL READ COMMITTED" if rc else None
    return pymysql.connect(host=HOST, port=PORT, user="root", database=db, autocommit=True,
                           init_command=init)


def q(c, sql, args=None):
    with c.cursor() as cur:
        cur.execute(sql, args)
        return cur.fetchall()


def now_us():
    return int(time.time() * 1_000_000)


def today_ddl(t):
    return f"""CREATE TABLE {t} (
      id BIGINT NOT NULL PRIMARY KEY, queue VARCHAR(128) NOT NULL, kind VARCHAR(128) NULL,
      payload JSON NOT NULL DEFAULT ('{{}}'), state VARCHAR(16) NOT NULL DEFAULT 'available',
      priority SMALLINT NOT NULL DEFAULT 0, run_at BIGINT NOT NULL, attempt INT NOT NULL DEFAULT 0,
      max_attempts INT NULL, lease_token BIGINT NULL, lease_owner VARCHAR(255) NULL,
      lease_expires_at BIGINT NULL, unique_key VARCHAR(255) NULL,
      unique_active VARCHAR(255) GENERATED ALWAYS AS
        (CASE WHEN state IN ('available', 'running', 'held', 'waiting') THEN unique_key END) STORED,
      errors JSON NOT NULL DEFAULT ('[]'), result JSON NULL, progress JSON NULL,
      created_at BIGINT NOT NULL DEFAULT 0, attempted_at BIGINT NULL, finished_at BIGINT NULL,
      cancel_requested_at BIGINT NULL, trace_context TEXT NULL, group_key VARCHAR(255) NULL,
      shard INT NOT NULL DEFAULT 0,
      KEY {t}_claim (queue, state, shard, priority, run_at, id),
      KEY {t}_lease (state, lease_expires_at),
      UNIQUE KEY {t}_unique (queue, unique_active),
      KEY {t}_group (queue, group_key, id)
    ) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin"""


def ringlog_ddl(k):
    return [f"""CREATE TABLE job_{k} (
      rid BIGINT NOT NULL PRIMARY KEY, job_id BIGINT NULL, queue VARCHAR(128) NOT NULL,
      kind VARCHAR(128) NULL, payload JSON NOT NULL DEFAULT ('{{}}'),
      priority SMALLINT NOT NULL DEFAULT 0, run_at BIGINT NOT NULL, attempt INT NOT NULL DEFAULT 0,
      max_attempts INT NULL, unique_key VARCHAR(255) NULL, created_at BIGINT NOT NULL DEFAULT 0,
      trace_context TEXT NULL, group_key VARCHAR(255) NULL, shard INT NOT NULL DEFAULT 0,
      KEY job_{k}_claim (queue, shard, priority, run_at, rid)
    ) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin""",
            f"""CREATE TABLE lease_{k} (
      rid BIGINT NOT NULL PRIMARY KEY, queue VARCHAR(128) NOT NULL, shard INT NOT NULL,
      priority SMALLINT NOT NULL, run_at BIGINT NOT NULL, token BIGINT NOT NULL,
      owner VARCHAR(255) NOT NULL, expires_at BIGINT NOT NULL,
      KEY lease_{k}_cursor (queue, shard, priority, run_at, rid),
      KEY lease_{k}_expires (expires_at)
    ) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin""",
            f"""CREATE TABLE done_{k} (
      rid BIGINT NOT NULL PRIMARY KEY, outcome VARCHAR(16) NOT NULL, finished_at BIGINT NOT NULL
    ) ENGINE = InnoDB"""]


class Design:
    def __init__(self, name):
        self.name = name
        self.ring = name in ("ring", "ringlog")
        self.slots = list(range(SLOTS)) if self.ring else [0]
        self.live = [0]
        self.slot_enqueued = 0
        self.cursor = (-32768, -1, -1)
        self.next_id = 1
        self.truncated = 0
        self.truncate_blocked = 0
        self.rotate_blocked = 0

    def tables(self, k=None):
        ks = self.slots if k is None else [k]
        if self.name in ("today", "cursor"):
            return ["job"]
        if self.name == "ring":
            return [f"job_{k}" for k in ks]
        return [f"{t}_{k}" for k in ks for t in ("job", "lease", "done")]

    def setup(self):
        c = connect(db=None)
        q(c, f"DROP DATABASE IF EXISTS {DB}")
        q(c, f"CREATE DATABASE {DB}")
        c.select_db(DB)
        q(c, "CREATE TABLE other (id INT PRIMARY KEY, v VARCHAR(10)) ENGINE = InnoDB")
        q(c, "INSERT INTO other VALUES (1, 'x'), (2, 'y')")
        if self.name in ("today", "cursor"):
            q(c, today_ddl("job"))
        elif self.name == "ring":
            for k in self.slots:
                q(c, today_ddl(f"job_{k}"))
        else:
            for k in self.slots:
                for s in ringlog_ddl(k):
                    q(c, s)
        return c

    def cur(self):
        return self.live[-1]

    def table(self, k):
        return "job" if self.name in ("today", "cursor") else f"job_{k}"

    def enqueue(self, c, n):
        t = self.table(self.cur())
        idcol = "rid" if self.name == "ringlog" else "id"
        # ids from the client (one INSERT ... SELECT of a sequence of n), run_at = now.
        q(c, f"""INSERT INTO {t} ({idcol}, queue, kind, payload, run_at)
                 SELECT %s + seq, 'q', 'noop', JSON_OBJECT('i', seq), %s FROM seq_0_to_{n - 1}""",
          (self.next_id, now_us()))
        self.next_id += n
        if self.ring:
            self.slot_enqueued += n
            if self.slot_enqueued >= SLOT_JOBS:
                nxt = (self.cur() + 1) % SLOTS
                if nxt in self.live:
                    self.rotate_blocked += 1
                else:
                    self.live.append(nxt)
                    self.slot_enqueued = 0

    def select_sql(self, k, full=False):
        t = self.table(k)
        if self.name == "ringlog":
            cond = "" if full else "AND (run_at > %(cr)s OR (run_at = %(cr)s AND rid > %(ci)s))"
            return f"""SELECT rid, priority, run_at FROM {t} j FORCE INDEX ({t}_claim)
                WHERE queue = 'q' AND shard = 0 AND priority = 0 AND run_at <= %(now)s {cond}
                  AND NOT EXISTS (SELECT 1 FROM lease_{k} l WHERE l.rid = j.rid)
                ORDER BY run_at, rid LIMIT %(n)s FOR UPDATE SKIP LOCKED"""
        cond = ""
        if self.name == "cursor" and not full:
            cond = ("AND (priority > %(cp)s OR (priority = %(cp)s AND (run_at > %(cr)s "
                    "OR (run_at = %(cr)s AND id > %(ci)s))))")
        return f"""SELECT id, priority, run_at FROM {t} FORCE INDEX ({t}_claim)
            WHERE queue = 'q' AND state = 'available' AND shard = 0 AND run_at <= %(now)s {cond}
            ORDER BY priority, run_at, id LIMIT %(n)s FOR UPDATE SKIP LOCKED"""

    def params(self, c, k, n):
        p = {"now": now_us(), "n": n, "cp": self.cursor[0], "cr": self.cursor[1], "ci": self.cursor[2]}
        if self.name == "ringlog":
            r = q(c, f"""SELECT run_at, rid FROM lease_{k} FORCE INDEX (lease_{k}_cursor)
                        WHERE queue = 'q' AND shard = 0 AND priority = 0
                        ORDER BY run_at DESC, rid DESC LIMIT 1""")
            p["cr"], p["ci"] = r[0] if r else (-1, -1)
        return p

    def claim_slot(self, c, k, n, tok):
        rows = q(c, self.select_sql(k), self.params(c, k, n))
        if not rows:
            return []
        ids = [r[0] for r in rows]
        marks = ",".join(["%s"] * len(ids))
        t = now_us()
        if self.name == "ringlog":
            vals = ",".join(["(%s, 'q', 0, %s, %s, %s, 'w-1', %s)"] * len(rows))
            args = [x for r in rows for x in (r[0], r[1], r[2], tok, t + 30_000_000)]
            q(c, f"INSERT IGNORE INTO lease_{k} (rid, queue, shard, priority, run_at, token, owner, expires_at) "
                 f"VALUES {vals}", args)
            q(c, f"SELECT rid, payload FROM job_{k} WHERE rid IN ({marks})", ids)
        else:
            q(c, f"""UPDATE {self.table(k)} FORCE INDEX (PRIMARY) SET state = 'running',
                     attempt = attempt + 1, lease_token = %s, lease_owner = 'w-1',
                     lease_expires_at = %s, attempted_at = %s WHERE id IN ({marks})""",
              [tok, t + 30_000_000, t] + ids)
            if self.name == "cursor":
                self.cursor = max((r[1], r[2], r[0]) for r in rows)
        return ids

    def claim(self, c):
        tok = random.randrange(1, 1 << 62)
        got, need = [], BATCH
        q(c, "BEGIN")
        for k in list(self.live):
            ids = self.claim_slot(c, k, need, tok)
            if ids:
                got.append((k, ids))
                need -= len(ids)
            if need <= 0:
                break
        q(c, "COMMIT")
        return got, tok

    def complete(self, c, got, tok):
        q(c, "BEGIN")
        for k, ids in got:
            marks = ",".join(["%s"] * len(ids))
            if self.name == "ringlog":
                q(c, f"""INSERT IGNORE INTO done_{k} (rid, outcome, finished_at)
                         SELECT rid, 'completed', %s FROM lease_{k} WHERE rid IN ({marks}) AND token = %s""",
                  [now_us()] + ids + [tok])
            else:
                q(c, f"""DELETE FROM {self.table(k)} WHERE id IN ({marks})
                         AND lease_token = %s AND state = 'running'""", ids + [tok])
        q(c, "COMMIT")

    def analyze(self, c, full=False):
        """pages_accessed and rows of the claim's locking SELECT(s), by ANALYZE, rolled back."""
        pages, rows, ms = 0, 0, 0.0
        self.access = None
        q(c, "BEGIN")
        try:
            for k in list(self.live):
                sql = self.select_sql(k, full)
                p = self.params(c, k, BATCH - rows)
                doc = json.loads(q(c, "ANALYZE FORMAT=JSON " + sql, p)[0][0])
                blk = doc["query_block"]
                ms += blk.get("r_total_time_ms", 0)
                for t in walk_tables(blk):
                    pages += t.get("r_engine_stats", {}).get("pages_accessed", 0)
                    if t.get("table_name", "").startswith("job"):
                        self.access = f"{t.get('access_type')} {','.join(t.get('used_key_parts', []))}"
                got = q(c, sql.replace("FOR UPDATE SKIP LOCKED", ""), p)
                rows += len(got)
                if rows >= BATCH:
                    break
        finally:
            q(c, "ROLLBACK")
        return pages, round(ms, 2)

    def maintain(self, c):
        if not self.ring:
            return
        while len(self.live) > 1:
            k = self.live[0]
            if self.name == "ring":
                empty = not q(c, f"SELECT 1 FROM job_{k} LIMIT 1")
            else:
                empty = q(c, f"SELECT (SELECT count(*) FROM job_{k}) = (SELECT count(*) FROM done_{k})")[0][0] == 1
            if not empty:
                return
            try:
                for t in self.tables(k):
                    q(c, f"TRUNCATE TABLE {t} NOWAIT")
                self.live.pop(0)
                self.truncated += 1
            except pymysql.err.OperationalError as e:
                if e.args[0] not in (1205, 1213):
                    raise
                self.truncate_blocked += 1
                return

    def size(self, c):
        r = q(c, "SELECT coalesce(sum(FILE_SIZE), 0) FROM information_schema.INNODB_SYS_TABLESPACES "
                 "WHERE NAME LIKE %s AND NAME NOT LIKE %s", (DB + "/%", DB + "/other"))
        return int(r[0][0])


def walk_tables(node):
    """Every "table" object of an ANALYZE FORMAT=JSON document."""
    if isinstance(node, dict):
        for k, v in node.items():
            if k == "table" and isinstance(v, dict):
                yield v
            yield from walk_tables(v)
    elif isinstance(node, list):
        for v in node:
            yield from walk_tables(v)


def gstatus(c, name):
    return int(q(c, "SHOW GLOBAL STATUS LIKE %s", (name,))[0][1])


def sstatus(c):
    r = dict(q(c, "SHOW SESSION STATUS WHERE Variable_name IN ('Handler_read_key', 'Handler_read_next')"))
    return int(r["Handler_read_key"]) + int(r["Handler_read_next"])


def history(c):
    return int(q(c, "SELECT `COUNT` FROM information_schema.INNODB_METRICS WHERE NAME = 'trx_rseg_history_len'")[0][0])


def hold(mode, design):
    h = connect(rc=False)
    q(h, "SET SESSION TRANSACTION ISOLATION LEVEL REPEATABLE READ")
    q(h, "START TRANSACTION WITH CONSISTENT SNAPSHOT")
    if mode == "held":
        for t in design.tables():
            q(h, f"SELECT count(*) FROM {t}")
    else:
        q(h, "SELECT count(*) FROM other")
    return h


def run(design_name, mode):
    d = Design(design_name)
    c = d.setup()
    q(c, "SET SESSION TRANSACTION ISOLATION LEVEL READ COMMITTED")
    holder = hold(mode, d) if mode != "free" else None
    d.enqueue(c, STEP)
    completed = 0
    bp, hd, ms = [], [], []
    t0 = time.time()
    while True:
        if completed in CHECKPOINTS:
            pages, ams = d.analyze(c)
            access = d.access
            fpages = d.analyze(c, full=True)[0] if design_name in ("cursor", "ringlog") else None
            row = {"design": design_name, "mode": mode, "completed": completed,
                   "pages": pages, "analyze_ms": ams, "full_pass_pages": fpages,
                   "access": access,
                   "bp_reads": round(statistics.mean(bp[-20:]), 1), "handler": round(statistics.mean(hd[-20:]), 1),
                   "claim_ms": round(statistics.mean(ms[-20:]), 2),
                   "history_len": history(c), "size_mb": round(d.size(c) / 1048576, 1),
                   "live_slots": len(d.live), "truncated": d.truncated,
                   "truncate_blocked": d.truncate_blocked, "rotate_blocked": d.rotate_blocked,
                   "elapsed_s": round(time.time() - t0, 1)}
            print(json.dumps(row), flush=True)
        if completed >= JOBS:
            break
        d.enqueue(c, STEP)
        done = 0
        while done < STEP:
            b0, h0, t = gstatus(c, "Innodb_buffer_pool_read_requests"), sstatus(c), time.time()
            got, tok = d.claim(c)
            ms.append((time.time() - t) * 1000)
            b1, h1 = gstatus(c, "Innodb_buffer_pool_read_requests"), sstatus(c)
            bp.append(b1 - b0)
            hd.append(h1 - h0 - 1)   # less the SHOW's own lookup
            n = sum(len(ids) for _, ids in got)
            assert n > 0, "queue ran dry"
            d.complete(c, got, tok)
            done += n
        completed += done
        d.maintain(c)
    if holder is not None:
        q(holder, "ROLLBACK")
        holder.close()
    c.close()


def hotrow(updates):
    """(c) One row updated N times under a held consistent snapshot: pages to read it (a
    consistent read must build its version from the undo chain) and to update it."""
    c = connect(db=None)
    q(c, f"DROP DATABASE IF EXISTS {DB}")
    q(c, f"CREATE DATABASE {DB}")
    c.select_db(DB)
    q(c, "CREATE TABLE other (id INT PRIMARY KEY) ENGINE = InnoDB")
    q(c, "INSERT INTO other VALUES (1)")
    for mode in ("free", "foreign"):
        q(c, "DROP TABLE IF EXISTS counter")
        q(c, "CREATE TABLE counter (id INT PRIMARY KEY, v BIGINT NOT NULL) ENGINE = InnoDB")
        q(c, "INSERT INTO counter VALUES (1, 0)")
        h = None
        if mode == "foreign":
            h = connect(rc=False)
            q(h, "START TRANSACTION WITH CONSISTENT SNAPSHOT")
            q(h, "SELECT count(*) FROM other")
        # A second reader whose snapshot is older than the updates but newer than the holder:
        # reads in READ COMMITTED see the newest version directly.
        done = 0
        for target in (0, 1000, 10000, updates):
            while done < target:
                q(c, "UPDATE counter SET v = v + 1 WHERE id = 1")
                done += 1
            doc = json.loads(q(c, "ANALYZE FORMAT=JSON SELECT v FROM counter WHERE id = 1")[0][0])
            rp = sum(t.get("r_engine_stats", {}).get("pages_accessed", 0) for t in walk_tables(doc))
            t = time.time()
            q(c, "UPDATE counter SET v = v + 1 WHERE id = 1")
            done += 1
            um = (time.time() - t) * 1000
            print(json.dumps({"mode": mode, "updates": target, "rc_read_pages": rp,
                              "update_ms": round(um, 3), "history_len": history(c)}), flush=True)
        if h is not None:
            # The holder's own read of the row walks the whole undo chain back to its snapshot.
            doc = json.loads(q(h, "ANALYZE FORMAT=JSON SELECT v FROM counter WHERE id = 1")[0][0])
            print(json.dumps({"mode": mode, "note": "the holder reading the row (consistent read)",
                              "pages": sum(t.get("r_engine_stats", {}).get("pages_accessed", 0)
                                           for t in walk_tables(doc)),
                              "ms": round(doc["query_block"].get("r_total_time_ms", 0), 2)}), flush=True)
            q(h, "ROLLBACK")
            h.close()
    c.close()


def locks():
    """(a) Which held sessions block TRUNCATE TABLE / TRUNCATE PARTITION (metadata locks)."""
    c = connect(db=None)
    q(c, f"DROP DATABASE IF EXISTS {DB}")
    q(c, f"CREATE DATABASE {DB}")
    c.select_db(DB)
    q(c, "CREATE TABLE other (id INT PRIMARY KEY, v VARCHAR(10)) ENGINE = InnoDB")
    q(c, "INSERT INTO other VALUES (1, 'x')")
    q(c, "CREATE TABLE slot_a (id BIGINT PRIMARY KEY, v VARCHAR(10)) ENGINE = InnoDB")
    q(c, """CREATE TABLE ringp (slot INT NOT NULL, id BIGINT NOT NULL, v VARCHAR(10), PRIMARY KEY (slot, id))
            ENGINE = InnoDB PARTITION BY LIST (slot)
            (PARTITION p0 VALUES IN (0), PARTITION p1 VALUES IN (1), PARTITION p2 VALUES IN (2),
             PARTITION p3 VALUES IN (3))""")
    snap = ["SET SESSION TRANSACTION ISOLATION LEVEL REPEATABLE READ", "START TRANSACTION WITH CONSISTENT SNAPSHOT"]
    cases = [
        ("consistent snapshot that read the slot table", "TRUNCATE TABLE slot_a NOWAIT",
         snap + ["SELECT count(*) FROM slot_a"], "slot_a"),
        ("consistent snapshot that read only another table", "TRUNCATE TABLE slot_a NOWAIT",
         snap + ["SELECT count(*) FROM other"], "slot_a"),
        ("idle in transaction (READ COMMITTED) that wrote another table", "TRUNCATE TABLE slot_a NOWAIT",
         ["BEGIN", "UPDATE other SET v = 'y' WHERE id = 1"], None),
        ("idle in transaction that enqueued into the slot", "TRUNCATE TABLE slot_a NOWAIT",
         ["BEGIN", "INSERT INTO slot_a VALUES (1000, 'x')"], None),
        ("consistent snapshot that read partition p3 only (WHERE slot = 3)",
         "ALTER TABLE ringp NOWAIT TRUNCATE PARTITION p1",
         snap + ["SELECT count(*) FROM ringp WHERE slot = 3"], None),
        ("consistent snapshot that read partition p3 only (PARTITION (p3))",
         "ALTER TABLE ringp NOWAIT TRUNCATE PARTITION p1",
         snap + ["SELECT count(*) FROM ringp PARTITION (p3)"], None),
        ("consistent snapshot that read only another table", "ALTER TABLE ringp NOWAIT TRUNCATE PARTITION p1",
         snap + ["SELECT count(*) FROM other"], "ringp PARTITION (p1)"),
    ]
    for label, stmt, hs, reread in cases:
        q(c, "TRUNCATE TABLE slot_a")
        q(c, "TRUNCATE TABLE ringp")
        q(c, "INSERT INTO slot_a SELECT seq, 'x' FROM seq_1_to_100")
        q(c, "INSERT INTO ringp SELECT seq % 4, seq, 'x' FROM seq_1_to_100")
        h = connect(rc=False)
        for s in hs:
            q(h, s)
        t = time.time()
        try:
            q(c, stmt)
            outcome = "done"
        except pymysql.err.OperationalError as e:
            outcome = f"failed at once: {e.args[0]} {e.args[1]}"
        ms = (time.time() - t) * 1000
        after = ""
        if outcome == "done" and reread:
            try:
                n = q(h, f"SELECT count(*) FROM {reread}")[0][0]
                after = f"; the held snapshot then counts {n} rows in it"
            except pymysql.err.MySQLError as e:
                after = f"; the held snapshot then reading it: error {e.args[0]} {e.args[1]}"
        q(h, "ROLLBACK")
        h.close()
        print(f"- {label}: `{stmt}` {outcome} ({ms:.0f} ms){after}", flush=True)

    # A TRUNCATE waiting on a metadata lock queues later users of the table behind it.
    h = connect(rc=False)
    for s in snap + ["SELECT count(*) FROM slot_a"]:
        q(h, s)
    res = {}

    def truncater():
        t = connect()
        try:
            q(t, "TRUNCATE TABLE slot_a WAIT 1")
            res["trunc"] = "done"
        except pymysql.err.OperationalError as e:
            res["trunc"] = f"error {e.args[0]}"
        t.close()

    th = threading.Thread(target=truncater)
    th.start()
    time.sleep(0.2)
    u = connect()
    t = time.time()
    q(u, "SELECT count(*) FROM slot_a")
    res["user_ms"] = round((time.time() - t) * 1000)
    th.join()
    u.close()
    q(h, "ROLLBACK")
    h.close()
    print(f"- a reader of the slot arriving while `TRUNCATE TABLE slot_a WAIT 1` waits behind the "
          f"held snapshot: waited {res['user_ms']} ms (truncate: {res['trunc']})", flush=True)
    # Seeing the holder without queueing: metadata_lock_info, if the plugin is loaded.
    try:
        h = connect(rc=False)
        for s in snap + ["SELECT count(*) FROM slot_a"]:
            q(h, s)
        r = q(c, "SELECT count(*) FROM information_schema.METADATA_LOCK_INFO WHERE TABLE_SCHEMA = %s "
                 "AND TABLE_NAME = 'slot_a'", (DB,))
        print(f"- information_schema.METADATA_LOCK_INFO rows for the slot: {r[0][0]}", flush=True)
        q(h, "ROLLBACK")
        h.close()
    except pymysql.err.MySQLError as e:
        print(f"- information_schema.METADATA_LOCK_INFO: not available ({e.args[0]})", flush=True)
    c.close()


def drop():
    c = connect(db=None)
    q(c, f"DROP DATABASE IF EXISTS {DB}")
    c.close()


def main():
    cmd = sys.argv[1] if len(sys.argv) > 1 else "run"
    if cmd == "run":
        pairs = sys.argv[2:] or ["today:free", "today:held", "cursor:held", "ring:foreign", "ring:held",
                                 "ringlog:free", "ringlog:foreign", "ringlog:held"]
        for p in pairs:
            d, m = p.split(":")
            run(d, m)
    elif cmd == "hotrow":
        hotrow(int(sys.argv[2]) if len(sys.argv) > 2 else 20000)
    elif cmd == "locks":
        locks()
    elif cmd != "drop":
        raise SystemExit(__doc__)
    drop()


if __name__ == "__main__":
    main()
