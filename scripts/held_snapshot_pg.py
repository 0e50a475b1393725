#!/usr/bin/env python3
"""Bare SQL on PostgreSQL: what a claim costs while another session holds an old snapshot
(issue 43, step 1). No Rust, no backlog binary: every statement is written out here.

    /usr/bin/python3 scripts/held_snapshot_pg.py run [DESIGN:MODE ...]    # claim cost vs jobs completed
    /usr/bin/python3 scripts/held_snapshot_pg.py hotrow [UPDATES]         # one row updated N times (20000;
                                                                          # quadratic under the snapshot)
    /usr/bin/python3 scripts/held_snapshot_pg.py locks                    # which held snapshots block TRUNCATE
    /usr/bin/python3 scripts/held_snapshot_pg.py pgbench [SECONDS]        # jobs/s, no held snapshot
    /usr/bin/python3 scripts/held_snapshot_pg.py drop                     # drop the schema

Environment: PGURL (default postgres://postgres@127.0.0.1:5432/test), JOBS (200000 completed per
run), BATCH (100 jobs a claim). Everything lives in the schema `snapresearch` (made and dropped
here). Needs psycopg 3 (Debian: python3-psycopg) and, for `pgbench`, the pgbench client. The
server should run with autovacuum off (the project's test cluster does), so that the runs without
a held snapshot are cleaned only by the VACUUM this script runs.

`run` drives each design through the same steady load, in one session: 1,000 jobs queued ahead;
each step enqueues 1,000 jobs (one INSERT), claims them in claims of BATCH (one transaction each)
and completes each claim in a transaction of its own. The cost of a claim is the buffers its
transaction asked for (pg_stat_get_xact_blocks_fetched summed over the design's tables and
indexes, read inside the claim's transaction: hits and reads, so it counts work whatever the CPU
noise), averaged over the last 20 claims before each checkpoint (1k, 50k, 100k, 200k completed),
and cross-checked there by one EXPLAIN (ANALYZE, BUFFERS) of the claim (rolled back).

Designs:
  today    backlog's table (its 22 columns and its five indexes: claim, lease, rest, unique,
           group); claim = UPDATE ... WHERE id IN (SELECT ... ORDER BY priority, run_at, id
           LIMIT n FOR UPDATE SKIP LOCKED); completion = DELETE fenced by the lease token.
  cursor   today's table and writes; the claim starts past the last key this client claimed,
           (priority, run_at, id) > cursor, so the index scan starts past the dead head. The
           "full pass" column is the same claim from the head (what a periodic pass costs).
  ring     8 slot tables like today's; new jobs go into the current slot, which moves on every
           10,000 jobs; the claim takes the live slots oldest first; a slot that is not the
           current one and has no row left is emptied with TRUNCATE (lock_timeout 50 ms;
           skipped when it times out); the ring cannot move into a slot not yet emptied.
  ringlog  8 slots, each three insert-only tables: job (never updated or deleted), lease (one
           row per claimed job: the claim inserts it, ON CONFLICT (rid) DO NOTHING, and the
           claim skips jobs that have one) and done (the completion inserts it, fenced by the
           lease's token). The claim starts past the slot's largest claimed key (read from the
           lease table's index: one descent); "full pass" is the claim from the slot's head. A
           slot is emptied (TRUNCATE of its three tables) once every job row has a done row.
Modes:
  free     no held snapshot; VACUUM of the design's tables every 10,000 jobs completed.
  held     another session: BEGIN ISOLATION LEVEL REPEATABLE READ and a SELECT of every job
           table of the design (so it holds ACCESS SHARE on them, as pg_dump or a report on the
           job table does).
  foreign  another session: BEGIN ISOLATION LEVEL REPEATABLE READ and a SELECT of an unrelated
           table only (an analytics report, pg_dump of another table): the horizon is held but
           no lock on the job tables.
  novac    no held snapshot and no VACUUM (the ring designs empty their slots by TRUNCATE alone;
           a slot never vacuumed keeps reltuples = -1 after its TRUNCATE, see the journal).
"""
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import threading
import time

import psycopg

URL = os.environ.get("PGURL", "postgres://postgres@127.0.0.1:5432/test")
SCHEMA = "snapresearch"
JOBS = int(os.environ.get("JOBS", "200000"))
BATCH = int(os.environ.get("BATCH", "100"))
STEP = 1000
SLOTS = 8
SLOT_JOBS = 10000
# The first checkpoint comes after the first 1,000 jobs (so that there are claims to average).
CHECKPOINTS = [int(x) for x in os.environ.get("CHECKPOINTS", "1000,50000,100000,200000").split(",")]


def connect():
    c = psycopg.connect(URL, autocommit=True)
    c.execute(f"SET search_path = {SCHEMA}")
    return c


def now_us():
    return int(time.time() * 1_000_000)


TODAY_COLS = """
    id BIGINT PRIMARY KEY DEFAULT nextval('snapresearch.rid'),
    queue TEXT NOT NULL, kind TEXT, payload JSONB NOT NULL DEFAULT '{}',
    state TEXT NOT NULL DEFAULT 'available'
      CHECK (state IN ('available', 'running', 'completed', 'dead', 'cancelled', 'held', 'waiting')),
    priority SMALLINT NOT NULL DEFAULT 0, run_at BIGINT NOT NULL, attempt INT NOT NULL DEFAULT 0,
    max_attempts INT, lease_token BIGINT, lease_owner TEXT, lease_expires_at BIGINT,
    unique_key TEXT, errors JSONB NOT NULL DEFAULT '[]', result JSONB, progress JSONB,
    created_at BIGINT NOT NULL DEFAULT 0, attempted_at BIGINT, finished_at BIGINT,
    cancel_requested_at BIGINT, trace_context TEXT, group_key TEXT, shard INT NOT NULL DEFAULT 0
"""


def today_ddl(t):
    return f"""
    CREATE TABLE {t} ({TODAY_COLS});
    CREATE INDEX {t}_claim ON {t} (queue, shard, priority, run_at, id) WHERE state = 'available';
    CREATE INDEX {t}_lease ON {t} (lease_expires_at) WHERE lease_expires_at IS NOT NULL;
    CREATE INDEX {t}_rest ON {t} (queue, state, id) WHERE state NOT IN ('available', 'running');
    CREATE UNIQUE INDEX {t}_unique ON {t} (queue, unique_key)
      WHERE unique_key IS NOT NULL AND state IN ('available', 'running', 'held', 'waiting');
    CREATE INDEX {t}_group ON {t} (queue, group_key, id)
      WHERE group_key IS NOT NULL AND state IN ('waiting', 'available', 'running');
    """


def today_enqueue(t):
    return (f"INSERT INTO {t} (queue, kind, payload, run_at) "
            "SELECT 'q', 'noop', jsonb_build_object('i', g), %(now)s FROM generate_series(1, %(n)s) g")


def today_claim(t, cursor):
    cond = "AND (priority, run_at, id) > (%(cp)s, %(cr)s, %(ci)s)" if cursor else ""
    return f"""
    UPDATE {t} j SET state = 'running', attempt = j.attempt + 1, lease_token = %(tok)s,
      lease_owner = 'w-1', lease_expires_at = %(exp)s, attempted_at = %(now)s
    WHERE j.id IN (SELECT id FROM {t} WHERE queue = 'q' AND shard = 0 AND state = 'available'
                     AND run_at <= %(now)s {cond}
                   ORDER BY priority, run_at, id LIMIT %(n)s FOR UPDATE SKIP LOCKED)
    RETURNING j.id, j.priority, j.run_at, j.payload"""


def today_complete(t):
    return f"DELETE FROM {t} WHERE id = ANY(%(ids)s) AND state = 'running' AND lease_token = %(tok)s"


def ringlog_ddl(k):
    return f"""
    CREATE TABLE job_{k} (rid BIGINT PRIMARY KEY DEFAULT nextval('snapresearch.rid'),
      job_id BIGINT, queue TEXT NOT NULL, kind TEXT,
      payload JSONB NOT NULL DEFAULT '{{}}', priority SMALLINT NOT NULL DEFAULT 0,
      run_at BIGINT NOT NULL, attempt INT NOT NULL DEFAULT 0, max_attempts INT,
      unique_key TEXT, created_at BIGINT NOT NULL DEFAULT 0, trace_context TEXT, group_key TEXT,
      shard INT NOT NULL DEFAULT 0);
    CREATE INDEX job_{k}_claim ON job_{k} (queue, shard, priority, run_at, rid);
    CREATE TABLE lease_{k} (rid BIGINT PRIMARY KEY, queue TEXT NOT NULL, shard INT NOT NULL,
      priority SMALLINT NOT NULL, run_at BIGINT NOT NULL, token BIGINT NOT NULL,
      owner TEXT NOT NULL, expires_at BIGINT NOT NULL);
    CREATE INDEX lease_{k}_cursor ON lease_{k} (queue, shard, priority, run_at, rid);
    CREATE INDEX lease_{k}_expires ON lease_{k} (expires_at);
    CREATE TABLE done_{k} (rid BIGINT PRIMARY KEY, outcome TEXT NOT NULL, finished_at BIGINT NOT NULL);
    """


def ringlog_claim(k, cursor):
    # The cursor is two scalar subqueries (InitPlans): so the row comparison is an index
    # condition where the scan starts. (Through a joined CTE or LATERAL it was a join filter: the
    # scan walked the slot from its head.) "No lease yet" is a correlated scalar subquery, not
    # NOT EXISTS: a NOT EXISTS becomes an anti join, and a generic plan made while the slot was
    # empty joined it as a whole scan of lease_k's primary key with a join filter, per job. The
    # probe names every column of the cursor index too: with `rid` alone, such a plan probed
    # the cursor index (rid is its last column), a scan of the whole index per job.
    # That probe in the claim from the cursor ran at about 6,200 jobs/s in `pgbench` against
    # about 52,900 with NOT EXISTS, for a reason not found (docs/bench-journal/2026-11-28-...).
    last = (f"(SELECT {{}} FROM lease_{k} WHERE queue = 'q' AND shard = 0 AND priority = 0 "
            "ORDER BY run_at DESC, rid DESC LIMIT 1)")
    cur = (f"(coalesce({last.format('run_at')}, -1), coalesce({last.format('rid')}, -1))"
           if cursor else "(-1, -1)")
    # Past the cursor the only leased jobs are those of claimers racing this one: the lease
    # insert's ON CONFLICT settles them, so the claim from the cursor has no probe at all. The
    # full pass (from the head) must skip leased jobs, with the probe.
    probe = "" if cursor else f"""AND (SELECT true FROM lease_{k} x WHERE x.queue = j.queue AND x.shard = j.shard
               AND x.priority = j.priority AND x.run_at = j.run_at AND x.rid = j.rid) IS NULL"""
    return f"""
    WITH picked AS (
      SELECT j.rid, j.priority, j.run_at FROM job_{k} j
      WHERE j.queue = 'q' AND j.shard = 0 AND j.priority = 0 AND j.run_at <= %(now)s
        AND (j.run_at, j.rid) > {cur}
        {probe}
      ORDER BY j.run_at, j.rid LIMIT %(n)s
      FOR UPDATE OF j SKIP LOCKED
    ), ins AS (
      INSERT INTO lease_{k} (rid, queue, shard, priority, run_at, token, owner, expires_at)
      SELECT rid, 'q', 0, priority, run_at, %(tok)s, 'w-1', %(exp)s FROM picked
      ON CONFLICT (rid) DO NOTHING RETURNING rid
    )
    SELECT j.rid, j.priority, j.run_at, j.payload FROM job_{k} j WHERE j.rid IN (SELECT rid FROM ins)"""


def ringlog_complete(k):
    return f"""INSERT INTO done_{k} (rid, outcome, finished_at)
    SELECT rid, 'completed', %(now)s FROM lease_{k} WHERE rid = ANY(%(ids)s) AND token = %(tok)s
    ON CONFLICT (rid) DO NOTHING"""


class Design:
    """One storage and claim shape. Slots: list of slot names; single-table designs have one."""

    def __init__(self, name):
        self.name = name
        self.ring = name in ("ring", "ringlog")
        self.slots = list(range(SLOTS)) if self.ring else [0]
        self.live = [0]          # slots not emptied, oldest first; the last is the current one
        self.slot_enqueued = 0
        self.cursor = (-32768, -1, -1)
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

    def setup(self, c):
        c.execute(f"DROP SCHEMA IF EXISTS {SCHEMA} CASCADE")
        c.execute(f"CREATE SCHEMA {SCHEMA}")
        c.execute(f"SET search_path = {SCHEMA}")
        c.execute("CREATE SEQUENCE rid")
        c.execute("CREATE TABLE other (id int PRIMARY KEY, v text)")
        c.execute("INSERT INTO other SELECT g, 'x' FROM generate_series(1, 1000) g")
        if self.name in ("today", "cursor"):
            c.execute(today_ddl("job"))
        elif self.name == "ring":
            for k in self.slots:
                c.execute(today_ddl(f"job_{k}"))
        else:
            for k in self.slots:
                c.execute(ringlog_ddl(k))
        self.oids = [r[0] for r in c.execute(
            "SELECT c.oid FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
            "WHERE n.nspname = %s AND c.relkind IN ('r', 'i') AND c.relname <> 'other' "
            "AND c.relname NOT LIKE 'other%%'", (SCHEMA,))]

    def cur(self):
        return self.live[-1]

    def enqueue(self, c, n):
        t = "job" if self.name in ("today", "cursor") else f"job_{self.cur()}"
        if self.name == "ringlog":
            sql = (f"INSERT INTO {t} (queue, kind, payload, run_at) "
                   "SELECT 'q', 'noop', jsonb_build_object('i', g), %(now)s FROM generate_series(1, %(n)s) g")
        else:
            sql = today_enqueue(t)
        c.execute(sql, {"now": now_us(), "n": n})
        if self.ring:
            self.slot_enqueued += n
            if self.slot_enqueued >= SLOT_JOBS:
                nxt = (self.cur() + 1) % SLOTS
                if nxt in self.live:
                    self.rotate_blocked += 1      # stay in the current slot
                else:
                    self.live.append(nxt)
                    self.slot_enqueued = 0

    def claim_sql(self, k, full=False):
        if self.name == "today":
            return today_claim("job", False)
        if self.name == "cursor":
            return today_claim("job", not full)
        if self.name == "ring":
            return today_claim(f"job_{k}", False)
        return ringlog_claim(k, not full)

    def params(self, tok, n):
        t = now_us()
        return {"tok": tok, "exp": t + 30_000_000, "now": t, "n": n,
                "cp": self.cursor[0], "cr": self.cursor[1], "ci": self.cursor[2]}

    def claim(self, c):
        """One claim transaction; returns ([(slot, ids)], token, blocks fetched)."""
        tok = random.randrange(1, 1 << 62)
        got = []
        need = BATCH
        with c.transaction():
            before = self.blocks(c)
            for k in list(self.live):
                rows = c.execute(self.claim_sql(k), self.params(tok, need)).fetchall()
                if rows:
                    got.append((k, [r[0] for r in rows]))
                    if self.name == "cursor":
                        self.cursor = max((r[1], r[2], r[0]) for r in rows)
                    need -= len(rows)
                if need <= 0:
                    break
            blocks = self.blocks(c) - before
        return got, tok, blocks

    def blocks(self, c):
        """Buffers asked for so far by this session's not-yet-flushed statistics: a difference of
        two readings in one transaction is the work of what ran between them (the pending
        counts are flushed only between transactions)."""
        return c.execute("SELECT coalesce(sum(pg_stat_get_xact_blocks_fetched(o)), 0)::bigint "
                         "FROM unnest(%s::oid[]) o", (self.oids,)).fetchone()[0]

    def complete(self, c, got, tok):
        with c.transaction():
            for k, ids in got:
                if self.name == "ringlog":
                    sql = ringlog_complete(k)
                else:
                    sql = today_complete("job" if self.name in ("today", "cursor") else f"job_{k}")
                c.execute(sql, {"ids": ids, "tok": tok, "now": now_us()})

    def explain(self, c, full=False):
        """Buffers (hit + read) and time of one claim (each live slot in turn, oldest first, until
        it has BATCH jobs, as claim() takes them) by EXPLAIN (ANALYZE, BUFFERS), rolled back."""
        blocks, ms, rows = 0, 0.0, 0
        c.execute("BEGIN")
        try:
            for k in list(self.live):
                plan = c.execute("EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) " + self.claim_sql(k, full),
                                 self.params(1, BATCH - rows)).fetchone()[0]
                p = plan[0]["Plan"]
                blocks += p.get("Shared Hit Blocks", 0) + p.get("Shared Read Blocks", 0)
                ms += plan[0]["Execution Time"]
                rows += p["Actual Rows"]
                if rows >= BATCH:
                    break
        finally:
            c.execute("ROLLBACK")
        return blocks, ms

    def maintain(self, c):
        """Ring designs: empty the oldest slots that hold nothing live (never the current one)."""
        if not self.ring:
            return
        while len(self.live) > 1:
            k = self.live[0]
            if self.name == "ring":
                empty = c.execute(f"SELECT NOT EXISTS (SELECT 1 FROM job_{k})").fetchone()[0]
            else:
                empty = c.execute(f"SELECT (SELECT count(*) FROM job_{k}) = (SELECT count(*) FROM done_{k})"
                                  ).fetchone()[0]
            if not empty:
                return
            try:
                with c.transaction():
                    c.execute("SET LOCAL lock_timeout = '50ms'")
                    c.execute("TRUNCATE " + ", ".join(self.tables(k)))
                self.live.pop(0)
                self.truncated += 1
            except psycopg.errors.LockNotAvailable:
                self.truncate_blocked += 1
                return

    def size(self, c):
        return c.execute("SELECT sum(pg_total_relation_size(c.oid))::bigint FROM pg_class c "
                         "JOIN pg_namespace n ON n.oid = c.relnamespace "
                         "WHERE n.nspname = %s AND c.relkind = 'r' AND c.relname <> 'other'",
                         (SCHEMA,)).fetchone()[0]

    def dead(self, c):
        return c.execute("SELECT coalesce(sum(n_dead_tup), 0)::bigint FROM pg_stat_user_tables "
                         "WHERE schemaname = %s", (SCHEMA,)).fetchone()[0]


def hold(mode, design):
    """The other session: a REPEATABLE READ snapshot really taken (a SELECT), kept open."""
    h = connect()
    h.execute("BEGIN ISOLATION LEVEL REPEATABLE READ")
    if mode == "held":
        for t in design.tables():
            h.execute(f"SELECT count(*) FROM {t}").fetchone()
    else:
        h.execute("SELECT count(*) FROM other").fetchone()
    xmin = h.execute("SELECT backend_xmin FROM pg_stat_activity WHERE pid = pg_backend_pid()").fetchone()[0]
    return h, xmin


def run(design_name, mode):
    d = Design(design_name)
    c = connect()
    d.setup(c)
    holder = None
    if mode in ("held", "foreign"):
        holder, xmin = hold(mode, d)
        assert xmin is not None
    d.enqueue(c, STEP)       # the 1,000 jobs queued ahead
    completed = 0
    costs, ccosts = [], []
    out = []
    t0 = time.time()
    while True:
        if completed in CHECKPOINTS:
            eb, et = d.explain(c)
            fb = d.explain(c, full=True)[0] if design_name in ("cursor", "ringlog") else None
            row = {"design": design_name, "mode": mode, "completed": completed,
                   "claim_blocks": round(statistics.mean(costs[-20:]), 1) if costs else None,
                   "complete_blocks": round(statistics.mean(ccosts[-20:]), 1) if ccosts else None,
                   "explain_blocks": eb, "explain_ms": round(et, 2), "full_pass_blocks": fb,
                   "size_mb": round(d.size(c) / 1048576, 1), "dead_tup": d.dead(c),
                   "live_slots": len(d.live), "truncated": d.truncated,
                   "truncate_blocked": d.truncate_blocked, "rotate_blocked": d.rotate_blocked,
                   "elapsed_s": round(time.time() - t0, 1)}
            print(json.dumps(row), flush=True)
            out.append(row)
        if completed >= JOBS:
            break
        d.enqueue(c, STEP)
        done = 0
        while done < STEP:
            got, tok, blocks = d.claim(c)
            n = sum(len(ids) for _, ids in got)
            assert n > 0, "queue ran dry"
            with c.transaction():
                before = d.blocks(c)
                d.complete(c, got, tok)
                cb = d.blocks(c) - before
            costs.append(blocks)
            ccosts.append(cb)
            done += n
        completed += done
        d.maintain(c)
        if mode == "free" and completed % 10000 == 0:
            for t in d.tables():
                c.execute(f"VACUUM {t}")
    if holder is not None:
        holder.execute("ROLLBACK")
        holder.close()
    c.close()
    return out


def hotrow(updates):
    """(c) One row updated N times (a cursor or counter row) with and without a held snapshot:
    buffers to read it and to update it once more, and the table's size."""
    c = connect()
    c.execute(f"DROP SCHEMA IF EXISTS {SCHEMA} CASCADE")
    c.execute(f"CREATE SCHEMA {SCHEMA}")
    c.execute(f"SET search_path = {SCHEMA}")
    c.execute("CREATE TABLE other (id int PRIMARY KEY)")
    c.execute("INSERT INTO other VALUES (1)")
    c.execute("""CREATE PROCEDURE bump(n int) LANGUAGE plpgsql AS $$
      BEGIN FOR i IN 1..n LOOP UPDATE counter SET v = v + 1 WHERE id = 1; COMMIT; END LOOP; END $$""")
    for mode in ("free", "foreign"):
        c.execute("DROP TABLE IF EXISTS counter")
        c.execute("CREATE TABLE counter (id int PRIMARY KEY, v bigint NOT NULL) WITH (fillfactor = 50)")
        c.execute("INSERT INTO counter VALUES (1, 0)")
        h = None
        if mode == "foreign":
            h = connect()
            h.execute("BEGIN ISOLATION LEVEL REPEATABLE READ")
            h.execute("SELECT count(*) FROM other").fetchone()
        done = 0
        for target in (0, 1000, 10000, updates):
            if target > done:
                c.execute("CALL bump(%s)", (target - done,))
                done = target
            plan = c.execute("EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) SELECT v FROM counter WHERE id = 1"
                             ).fetchone()[0][0]
            rb = plan["Plan"].get("Shared Hit Blocks", 0) + plan["Plan"].get("Shared Read Blocks", 0)
            rms = plan["Execution Time"]
            c.execute("BEGIN")
            plan = c.execute("EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) UPDATE counter SET v = v + 1 WHERE id = 1"
                             ).fetchone()[0][0]
            c.execute("ROLLBACK")
            ub = plan["Plan"].get("Shared Hit Blocks", 0) + plan["Plan"].get("Shared Read Blocks", 0)
            st = c.execute("SELECT n_tup_hot_upd, n_tup_upd, pg_total_relation_size('counter') "
                           "FROM pg_stat_user_tables WHERE relname = 'counter'").fetchone()
            print(json.dumps({"mode": mode, "updates": target, "read_blocks": rb,
                              "read_ms": round(rms, 3), "update_blocks": ub,
                              "update_ms": round(plan["Execution Time"], 3),
                              "hot_updates": st[0], "updates_counted": st[1],
                              "size_kb": st[2] // 1024}), flush=True)
        if h is not None:
            h.execute("ROLLBACK")
            h.close()
    c.close()


def locks():
    """(a) Which held sessions block TRUNCATE of a slot, and what the waiting TRUNCATE does to
    the users of the slot."""
    c = connect()
    c.execute(f"DROP SCHEMA IF EXISTS {SCHEMA} CASCADE")
    c.execute(f"CREATE SCHEMA {SCHEMA}")
    c.execute(f"SET search_path = {SCHEMA}")
    c.execute("CREATE TABLE other (id int PRIMARY KEY, v text)")
    c.execute("INSERT INTO other VALUES (1, 'x')")
    c.execute("CREATE TABLE slot_a (id bigint PRIMARY KEY, v text)")
    c.execute("CREATE TABLE ringp (slot int NOT NULL, id bigint NOT NULL, v text) PARTITION BY LIST (slot)")
    for k in range(4):
        c.execute(f"CREATE TABLE ringp_{k} PARTITION OF ringp FOR VALUES IN ({k})")
    cases = [
        ("RR snapshot that read the slot table", "slot_a",
         ["BEGIN ISOLATION LEVEL REPEATABLE READ", "SELECT count(*) FROM slot_a"]),
        ("RR snapshot that read only another table (report, pg_dump -t other)", "slot_a",
         ["BEGIN ISOLATION LEVEL REPEATABLE READ", "SELECT count(*) FROM other"]),
        ("RR snapshot, pg_dump-style LOCK TABLE other IN ACCESS SHARE MODE", "slot_a",
         ["BEGIN ISOLATION LEVEL REPEATABLE READ", "LOCK TABLE other IN ACCESS SHARE MODE",
          "SELECT count(*) FROM other"]),
        ("RR snapshot, pg_dump-style LOCK TABLE of the slot (a dump of the whole database)", "slot_a",
         ["BEGIN ISOLATION LEVEL REPEATABLE READ", "LOCK TABLE slot_a IN ACCESS SHARE MODE",
          "SELECT count(*) FROM other"]),
        ("idle in transaction (READ COMMITTED) that wrote another table", "slot_a",
         ["BEGIN", "UPDATE other SET v = 'y' WHERE id = 1"]),
        ("idle in transaction that enqueued into the slot (transactional enqueue left open)", "slot_a",
         ["BEGIN", "INSERT INTO slot_a VALUES (1000, 'x')"]),
        ("RR snapshot that read partition 3 through the parent (WHERE slot = 3)", "ringp_1",
         ["BEGIN ISOLATION LEVEL REPEATABLE READ", "SELECT count(*) FROM ringp WHERE slot = 3"]),
        ("RR snapshot that read the parent, prepared statement (generic plan, slot = $1)", "ringp_1",
         ["BEGIN ISOLATION LEVEL REPEATABLE READ", "SET plan_cache_mode = force_generic_plan",
          "PREPARE p(int) AS SELECT count(*) FROM ringp WHERE slot = $1", "EXECUTE p(3)"]),
        ("RR snapshot that read the whole parent", "ringp_1",
         ["BEGIN ISOLATION LEVEL REPEATABLE READ", "SELECT count(*) FROM ringp"]),
    ]
    for label, target, stmts in cases:
        c.execute(f"TRUNCATE slot_a, ringp")
        c.execute("INSERT INTO slot_a SELECT g, 'x' FROM generate_series(1, 100) g")
        c.execute("INSERT INTO ringp SELECT g % 4, g, 'x' FROM generate_series(1, 100) g")
        h = connect()
        for s in stmts:
            h.execute(s)
        t = time.time()
        try:
            with c.transaction():
                c.execute("SET LOCAL lock_timeout = '50ms'")
                c.execute(f"TRUNCATE {target}")
            outcome = "TRUNCATE done"
        except psycopg.errors.LockNotAvailable:
            outcome = "TRUNCATE timed out (55P03)"
        ms = (time.time() - t) * 1000
        after = ""
        if outcome == "TRUNCATE done" and "REPEATABLE" in stmts[0]:
            try:
                n = h.execute(f"SELECT count(*) FROM {target}").fetchone()[0]
                after = f"; the held snapshot then counts {n} rows in it (it had 100 or 25 before)"
            except psycopg.Error as e:
                after = f"; the held snapshot then reading it: {type(e).__name__}"
        h.execute("ROLLBACK")
        h.close()
        print(f"- {label}: {outcome} after {ms:.0f} ms{after}", flush=True)

    # A TRUNCATE waiting for its lock queues every later user of the table behind it.
    h = connect()
    h.execute("BEGIN ISOLATION LEVEL REPEATABLE READ")
    h.execute("SELECT count(*) FROM slot_a").fetchone()
    res = {}

    def truncater():
        t = connect()
        try:
            with t.transaction():
                t.execute("SET LOCAL lock_timeout = '500ms'")
                t.execute("TRUNCATE slot_a")
        except psycopg.errors.LockNotAvailable:
            res["trunc"] = "timed out"
        t.close()

    th = threading.Thread(target=truncater)
    th.start()
    time.sleep(0.1)
    u = connect()
    t = time.time()
    u.execute("SELECT count(*) FROM slot_a").fetchone()
    res["user_ms"] = round((time.time() - t) * 1000)
    th.join()
    u.close()
    h.execute("ROLLBACK")
    h.close()
    print(f"- a reader of the slot arriving while a TRUNCATE (lock_timeout 500 ms) waits behind the "
          f"held snapshot: waited {res['user_ms']} ms (truncate {res.get('trunc', 'done')})", flush=True)
    # The remedy: look in pg_locks first (no queueing), TRUNCATE only when no other session holds a lock.
    h = connect()
    h.execute("BEGIN ISOLATION LEVEL REPEATABLE READ")
    h.execute("SELECT count(*) FROM slot_a").fetchone()
    held = c.execute("SELECT count(*) FROM pg_locks WHERE relation = 'slot_a'::regclass "
                     "AND pid <> pg_backend_pid() AND granted").fetchone()[0]
    h.execute("ROLLBACK")
    h.close()
    print(f"- pg_locks shows {held} granted lock(s) of another session on the slot: a check that queues "
          "behind nothing", flush=True)
    c.close()


PGBENCH_SETUP = {
    "today": today_ddl("job") + """
        INSERT INTO job (queue, kind, payload, run_at)
          SELECT 'q', 'noop', jsonb_build_object('i', g), 0 FROM generate_series(1, {jobs}) g;
        VACUUM ANALYZE job;""",
    "ringlog": ringlog_ddl(0) + """
        INSERT INTO job_0 (queue, kind, payload, run_at)
          SELECT 'q', 'noop', jsonb_build_object('i', g), 0 FROM generate_series(1, {jobs}) g;
        VACUUM ANALYZE job_0; VACUUM ANALYZE lease_0; VACUUM ANALYZE done_0;""",
}
PGBENCH_SCRIPT = {
    # Each transaction completes the client's previous claim (fenced by its token) and claims the
    # next BATCH jobs, in one transaction, as backlog's folded complete-and-claim does.
    "today": r"""\set newtok random(1, 1000000000000)
BEGIN;
DELETE FROM job WHERE id = ANY(:ids::bigint[]) AND state = 'running' AND lease_token = :tok::bigint;
WITH c AS (UPDATE job j SET state = 'running', attempt = j.attempt + 1, lease_token = :newtok::bigint,
  lease_owner = 'w-1', lease_expires_at = 99, attempted_at = 1
  WHERE j.id IN (SELECT id FROM job WHERE queue = 'q' AND shard = 0 AND state = 'available' AND run_at <= 1
                 ORDER BY priority, run_at, id LIMIT {batch} FOR UPDATE SKIP LOCKED)
  RETURNING j.id, j.payload) SELECT coalesce(array_agg(id), '{{}}')::text AS ids FROM c \gset
COMMIT;
\set tok :newtok
""",
    "cursor": r"""\set newtok random(1, 1000000000000)
BEGIN;
DELETE FROM job WHERE id = ANY(:ids::bigint[]) AND state = 'running' AND lease_token = :tok::bigint;
WITH c AS (UPDATE job j SET state = 'running', attempt = j.attempt + 1, lease_token = :newtok::bigint,
  lease_owner = 'w-1', lease_expires_at = 99, attempted_at = 1
  WHERE j.id IN (SELECT id FROM job WHERE queue = 'q' AND shard = 0 AND state = 'available' AND run_at <= 1
                   AND (priority, run_at, id) > (0, 0, :cur::bigint)
                 ORDER BY priority, run_at, id LIMIT {batch} FOR UPDATE SKIP LOCKED)
  RETURNING j.id, j.payload) SELECT coalesce(array_agg(id), '{{}}')::text AS ids,
    coalesce(max(id), :cur::bigint) AS cur FROM c \gset
COMMIT;
\set tok :newtok
""",
    "ringlog": r"""\set newtok random(1, 1000000000000)
BEGIN;
INSERT INTO done_0 (rid, outcome, finished_at)
  SELECT rid, 'completed', 1 FROM lease_0 WHERE rid = ANY(:ids::bigint[]) AND token = :tok::bigint
  ON CONFLICT (rid) DO NOTHING;
{claim} \gset
COMMIT;
\set tok :newtok
""",
}


def pgbench(seconds, clients=4, rounds=3):
    """Jobs/s of the fast path (no held snapshot) for today, cursor and ringlog, rounds alternating."""
    jobs = seconds * 100_000     # more than 4 clients drain in the time (checked after each run)
    c = connect()
    claim = ringlog_claim(0, True)
    for k, v in (("%(now)s", "1"), ("%(n)s", str(BATCH)), ("%(tok)s", ":newtok::bigint"), ("%(exp)s", "99")):
        claim = claim.replace(k, v)
    claim = " ".join(claim.split())
    last = "SELECT j.rid, j.priority, j.run_at, j.payload FROM job_0 j"
    assert last in claim
    claim = claim.replace(last, "SELECT coalesce(array_agg(j.rid), '{}')::text AS ids, "
                                "max(length(j.payload::text)) AS longest FROM job_0 j")
    results = {}
    with tempfile.TemporaryDirectory() as work:
        for r in range(rounds):
            for shape in (("today", "cursor", "ringlog") if r % 2 == 0 else ("ringlog", "cursor", "today")):
                c.execute(f"DROP SCHEMA IF EXISTS {SCHEMA} CASCADE")
                c.execute(f"CREATE SCHEMA {SCHEMA}")
                c.execute(f"SET search_path = {SCHEMA}")
                c.execute("CREATE SEQUENCE rid")
                setup = PGBENCH_SETUP["ringlog" if shape == "ringlog" else "today"].replace("{jobs}", str(jobs))
                for stmt in setup.split(";"):
                    if stmt.strip():
                        c.execute(stmt)
                c.execute("CHECKPOINT")
                path = os.path.join(work, shape + ".sql")
                script = PGBENCH_SCRIPT[shape].format(batch=BATCH, claim=claim)
                with open(path, "w") as f:
                    f.write(script)
                p = subprocess.run(
                    ["pgbench", "-n", "-M", "prepared", "-f", path, "-c", str(clients), "-j", "2", "-T", str(seconds),
                     "-D", "ids={}", "-D", "tok=0", "-D", "cur=0", URL + f"?options=-csearch_path%3D{SCHEMA}"],
                    capture_output=True, text=True,
                    # As backlog's connections run (docs/explain.md, "Plans made on an empty table").
                    env=dict(os.environ, PGOPTIONS="-c enable_seqscan=off -c jit=off"))
                tps = [l for l in p.stdout.splitlines() if l.startswith("tps")]
                if p.returncode != 0 or not tps:
                    print(p.stdout, p.stderr, file=sys.stderr)
                    raise SystemExit(f"pgbench failed for {shape}")
                tps = float(tps[0].split()[2])
                left = c.execute("SELECT count(*) FROM job" if shape != "ringlog" else
                                 "SELECT count(*) FROM job_0 j WHERE NOT EXISTS (SELECT 1 FROM lease_0 l WHERE l.rid = j.rid)"
                                 ).fetchone()[0]
                assert left > 0, f"{shape}: ran out of jobs"
                results.setdefault(shape, []).append(tps * BATCH)
                print(json.dumps({"shape": shape, "round": r, "jobs_per_s": round(tps * BATCH),
                                  "jobs_left": left}), flush=True)
    for shape, v in results.items():
        print(json.dumps({"shape": shape, "median_jobs_per_s": round(statistics.median(v))}), flush=True)
    c.close()


def main():
    cmd = sys.argv[1] if len(sys.argv) > 1 else "run"
    if cmd == "run":
        pairs = sys.argv[2:] or ["today:free", "today:held", "cursor:free", "cursor:held",
                                 "ring:free", "ring:foreign", "ring:held",
                                 "ringlog:free", "ringlog:foreign", "ringlog:held"]
        for p in pairs:
            d, m = p.split(":")
            run(d, m)
    elif cmd == "hotrow":
        hotrow(int(sys.argv[2]) if len(sys.argv) > 2 else 20000)
    elif cmd == "locks":
        locks()
    elif cmd == "pgbench":
        pgbench(int(sys.argv[2]) if len(sys.argv) > 2 else 15)
    elif cmd == "drop":
        c = connect()
        c.execute(f"DROP SCHEMA IF EXISTS {SCHEMA} CASCADE")
    else:
        raise SystemExit(__doc__)
    if cmd != "drop":
        connect().execute(f"DROP SCHEMA IF EXISTS {SCHEMA} CASCADE")


if __name__ == "__main__":
    main()
