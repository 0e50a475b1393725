#!/usr/bin/env python3
"""Bare SQL on MariaDB/MySQL: what a job costs in several claim shapes (issue 19, item 3).

    [BATCH=100] /usr/bin/python3 scripts/mysql_claim_shapes.py [JOBS] [THREADS] [SHAPE,SHAPE,...]

Every shape keeps a lease per claimed job (token and expiry on the job's row, fenced completion) and
complete by deleting. Each thread loops: one transaction deletes its previous batch (fenced by
its token) and claims the next BATCH jobs (default 100); the clock runs from the first claim to the last job.

- status: today's shape. One table; the claim index (queue, state, priority, run_at, id) and a
  lease index (state, lease_expires_at). A claim moves each row within both indexes (state
  changes), the completion deletes it.
- full: status with the unique-key and group indexes of today's table, which every job enters
  (with NULL keys) and leaves.
- nolease: full without the lease index: a rescue would find running jobs through the claim
  index, (queue, 'running'), one range per queue.
- lean: the claim index alone (unique keys and groups kept in side tables, entered only by the
  jobs that have them; the rescue through the claim index).
- ready: the claimable jobs also live in a narrow table whose clustered key is the claim order
  (queue, priority, run_at, id), no secondary index. A claim deletes its rows from there and
  sets the lease on the job row (its one secondary index: lease_expires_at, for the rescue); the
  completion deletes the job row. Enqueue writes both tables.
- ready_full: ready, the job table keeping every index of full.
- sharded: full with a shard column (0-15, at random at enqueue) leading the claim index after
  the state, (queue, state, shard, priority, run_at, id); a claim starts at a random shard and
  walks the others in turn until it has its batch.
- sharded_nolease: sharded without the lease index.
- sharded_rt: sharded in three round trips a transaction instead of five: BEGIN, the delete and
  the first shard's SELECT go as one multi-statement command, the UPDATE and COMMIT as another.
- ready_real: ready, the job table keeping the unique-key and group indexes of today's table
  (neither holds the state, so neither moves on a claim) and the lease index.
- sharded_tx: sharded, with no lease: each transaction locks its batch (the same shard walk)
  and deletes it before it commits, as a worker that runs its jobs while the claiming
  transaction is open would. No row is written but to delete it.
- trigger: ready_full with the ready table kept by triggers on the job table (the claim only
  updates the job; a trigger takes the row out of the ready table).

Default shapes: status,ready. Connections run in READ COMMITTED, as backlog's own.

Needs the local MariaDB (root, no password, database `test`); makes and drops its own tables.
"""
import os, sys, threading, time, random
import pymysql

JOBS = int(sys.argv[1]) if len(sys.argv) > 1 else 100_000
THREADS = int(sys.argv[2]) if len(sys.argv) > 2 else 8
BATCH = int(os.environ.get("BATCH", "100"))
SHARDS = 16


def connect():
    # READ COMMITTED, as backlog's own connections: no gap locks between claimers.
    return pymysql.connect(host="127.0.0.1", user="root", database="test", autocommit=True,
                           client_flag=pymysql.constants.CLIENT.MULTI_STATEMENTS,
                           init_command="SET SESSION TRANSACTION ISOLATION LEVEL READ COMMITTED")


# The job table's secondary indexes in each shape (the claim index, the lease index, and the
# unique-key and group indexes today's table has, which every job enters even without a key).
INDEXES = {
    "status": "KEY claim (queue, state, priority, run_at, id), KEY lease (state, lease_expires_at)",
    "full": "KEY claim (queue, state, priority, run_at, id), KEY lease (state, lease_expires_at), "
            "UNIQUE KEY uniq (queue, unique_active), KEY grp (queue, group_key, id)",
    "nolease": "KEY claim (queue, state, priority, run_at, id), "
               "UNIQUE KEY uniq (queue, unique_active), KEY grp (queue, group_key, id)",
    "lean": "KEY claim (queue, state, priority, run_at, id)",
    "ready": "KEY lease (lease_expires_at)",
    "ready_full": "KEY claim (queue, state, priority, run_at, id), KEY lease (state, lease_expires_at), "
                  "UNIQUE KEY uniq (queue, unique_active), KEY grp (queue, group_key, id)",
    "sharded": "KEY claim (queue, state, shard, priority, run_at, id), KEY lease (state, lease_expires_at), "
               "UNIQUE KEY uniq (queue, unique_active), KEY grp (queue, group_key, id)",
    "sharded_nolease": "KEY claim (queue, state, shard, priority, run_at, id), "
                       "UNIQUE KEY uniq (queue, unique_active), KEY grp (queue, group_key, id)",
    "sharded_rt": "KEY claim (queue, state, shard, priority, run_at, id), KEY lease (state, lease_expires_at), "
                  "UNIQUE KEY uniq (queue, unique_active), KEY grp (queue, group_key, id)",
    "sharded_tx": "KEY claim (queue, state, shard, priority, run_at, id), KEY lease (state, lease_expires_at), "
                  "UNIQUE KEY uniq (queue, unique_active), KEY grp (queue, group_key, id)",
    "ready_real": "KEY lease (lease_expires_at), UNIQUE KEY uniq (queue, unique_active), "
                  "KEY grp (queue, group_key, id)",
    "trigger": "KEY claim (queue, state, priority, run_at, id), KEY lease (state, lease_expires_at), "
               "UNIQUE KEY uniq (queue, unique_active), KEY grp (queue, group_key, id)",
}

# The trigger shape: the full table, and the ready table kept by triggers on it (single
# statements: a trigger fires for every row of every statement that moves a job in or out of
# 'available', whoever runs it).
TRIGGERS = [
    """CREATE TRIGGER shape_enter AFTER INSERT ON shape_job FOR EACH ROW
       INSERT INTO shape_ready (queue, priority, run_at, id)
       SELECT NEW.queue, NEW.priority, NEW.run_at, NEW.id FROM DUAL WHERE NEW.state = 'available'""",
    """CREATE TRIGGER shape_leave AFTER UPDATE ON shape_job FOR EACH ROW
       DELETE FROM shape_ready WHERE OLD.state = 'available'
         AND (NEW.state <> 'available' OR NEW.queue <> OLD.queue OR NEW.priority <> OLD.priority
              OR NEW.run_at <> OLD.run_at)
         AND queue = OLD.queue AND priority = OLD.priority AND run_at = OLD.run_at AND id = OLD.id""",
    """CREATE TRIGGER shape_move AFTER UPDATE ON shape_job FOR EACH ROW FOLLOWS shape_leave
       INSERT INTO shape_ready (queue, priority, run_at, id)
       SELECT NEW.queue, NEW.priority, NEW.run_at, NEW.id FROM DUAL WHERE NEW.state = 'available'
         AND (OLD.state <> 'available' OR NEW.queue <> OLD.queue OR NEW.priority <> OLD.priority
              OR NEW.run_at <> OLD.run_at)""",
    """CREATE TRIGGER shape_gone AFTER DELETE ON shape_job FOR EACH ROW
       DELETE FROM shape_ready WHERE OLD.state = 'available'
         AND queue = OLD.queue AND priority = OLD.priority AND run_at = OLD.run_at AND id = OLD.id""",
]


def setup(shape):
    c = connect().cursor()
    c.execute("DROP TABLE IF EXISTS shape_job")
    c.execute("DROP TABLE IF EXISTS shape_ready")
    c.execute(f"""CREATE TABLE shape_job (
        id BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY, queue VARCHAR(128) NOT NULL,
        state VARCHAR(16) NOT NULL DEFAULT 'available', priority SMALLINT NOT NULL DEFAULT 0,
        run_at BIGINT NOT NULL DEFAULT 0, attempt INT NOT NULL DEFAULT 0,
        lease_token BIGINT NULL, lease_expires_at BIGINT NULL, payload JSON NOT NULL,
        unique_key VARCHAR(255) NULL, shard SMALLINT NOT NULL DEFAULT 0, group_key VARCHAR(255) NULL,
        unique_active VARCHAR(255) GENERATED ALWAYS AS
            (CASE WHEN state IN ('available', 'running', 'held') THEN unique_key END) STORED,
        {INDEXES[shape]})""")
    if shape.startswith("ready") or shape == "trigger":
        c.execute("""CREATE TABLE shape_ready (
            queue VARCHAR(128) NOT NULL, priority SMALLINT NOT NULL, run_at BIGINT NOT NULL,
            id BIGINT NOT NULL, PRIMARY KEY (queue, priority, run_at, id))""")
    if shape == "trigger":
        for t in TRIGGERS:
            c.execute(t)
    return c


def enqueue(shape, c):
    t = time.perf_counter()
    for start in range(0, JOBS, 1000):
        n = min(1000, JOBS - start)
        c.execute("BEGIN")
        c.execute("INSERT INTO shape_job (queue, payload, shard) VALUES " +
                  ",".join(["('q', '{\"i\": %d}', %d)" % (start + i, random.randrange(SHARDS))
                            for i in range(n)]))
        if shape.startswith("ready"):
            first = c.lastrowid  # InnoDB gives a multi-row insert consecutive ids
            c.execute("INSERT INTO shape_ready (queue, priority, run_at, id) VALUES " +
                      ",".join(["('q', 0, 0, %d)" % (first + i) for i in range(n)]))
        c.execute("COMMIT")
    return JOBS / (time.perf_counter() - t)


def worker(shape, done, lock, deadlocks):
    c = connect().cursor()
    prev, prev_token = [], None
    while True:
        try:
            got, token = step(shape, c, prev, prev_token)
        except pymysql.err.OperationalError as e:
            if e.args[0] not in (1213, 1205):  # deadlock, lock wait timeout: try again
                raise
            c.execute("ROLLBACK")
            with lock:
                deadlocks[0] += 1
            continue
        if shape.endswith("_tx"):  # the batch is done when its transaction commits
            prev = got
        with lock:
            done[0] += len(prev)
        if not got and not prev:
            return
        prev, prev_token = got, token
        if shape.endswith("_tx"):
            prev = []


def step(shape, c, prev, prev_token):
    """One transaction: the previous batch deleted, the next claimed. Returns (claimed, token)."""
    token = random.getrandbits(62)
    if shape == "sharded_rt":
        return step_few_round_trips(c, prev, prev_token, token)
    c.execute("BEGIN")
    if prev and not shape.endswith("_tx"):
        ids = ",".join(map(str, prev))
        c.execute(f"DELETE FROM shape_job WHERE id IN ({ids}) AND lease_token = {prev_token}")
    if shape == "trigger":
        c.execute("SELECT r.id FROM shape_ready r JOIN shape_job j ON j.id = r.id "
                  "WHERE r.queue = 'q' AND r.run_at <= 1 ORDER BY r.priority, r.run_at, r.id "
                  f"LIMIT {BATCH} FOR UPDATE SKIP LOCKED")
        got = [r[0] for r in c.fetchall()]
    elif shape.startswith("sharded"):
        got, first = [], random.randrange(SHARDS)
        for k in range(SHARDS):
            c.execute("SELECT id FROM shape_job FORCE INDEX (claim) WHERE queue = 'q' AND "
                      f"state = 'available' AND shard = {(first + k) % SHARDS} AND run_at <= 1 "
                      f"ORDER BY priority, run_at, id LIMIT {BATCH - len(got)} FOR UPDATE SKIP LOCKED")
            got += [r[0] for r in c.fetchall()]
            if len(got) == BATCH:
                break
    elif not shape.startswith("ready"):
        c.execute("SELECT id FROM shape_job FORCE INDEX (claim) WHERE queue = 'q' AND "
                  "state = 'available' AND run_at <= 1 ORDER BY priority, run_at, id "
                  f"LIMIT {BATCH} FOR UPDATE SKIP LOCKED")
        got = [r[0] for r in c.fetchall()]
    else:
        c.execute("SELECT id FROM shape_ready WHERE queue = 'q' AND run_at <= 1 "
                  f"ORDER BY priority, run_at, id LIMIT {BATCH} FOR UPDATE SKIP LOCKED")
        got = [r[0] for r in c.fetchall()]
        if got:
            ids = ",".join(map(str, got))
            c.execute(f"DELETE FROM shape_ready WHERE queue = 'q' AND priority = 0 "
                      f"AND run_at = 0 AND id IN ({ids})")
    if got and shape.endswith("_tx"):
        ids = ",".join(map(str, got))
        c.execute(f"DELETE FROM shape_job WHERE id IN ({ids})")
    elif got:
        ids = ",".join(map(str, got))
        c.execute(f"UPDATE shape_job SET state = 'running', attempt = attempt + 1, "
                  f"lease_token = {token}, lease_expires_at = 99 WHERE id IN ({ids})")
    c.execute("COMMIT")
    return got, token


def step_few_round_trips(c, prev, prev_token, token):
    """The sharded step with its statements sent as two multi-statement commands (more only
    when the first shard comes up short)."""
    head = "BEGIN"
    if prev:
        ids = ",".join(map(str, prev))
        head += f"; DELETE FROM shape_job WHERE id IN ({ids}) AND lease_token = {prev_token}"
    got, first = [], random.randrange(SHARDS)
    for k in range(SHARDS):
        sql = ("SELECT id FROM shape_job FORCE INDEX (claim) WHERE queue = 'q' AND "
               f"state = 'available' AND shard = {(first + k) % SHARDS} AND run_at <= 1 "
               f"ORDER BY priority, run_at, id LIMIT {BATCH - len(got)} FOR UPDATE SKIP LOCKED")
        if head:
            c.execute(head + "; " + sql)
            while c.description is None and c.nextset():
                pass  # to the SELECT's result
            head = None
        else:
            c.execute(sql)
        got += [r[0] for r in c.fetchall()]
        if len(got) == BATCH:
            break
    if got:
        ids = ",".join(map(str, got))
        c.execute(f"UPDATE shape_job SET state = 'running', attempt = attempt + 1, "
                  f"lease_token = {token}, lease_expires_at = 99 WHERE id IN ({ids}); COMMIT")
        while c.nextset():
            pass
    else:
        c.execute("COMMIT")
    return got, token


def drain(shape):
    done, lock, deadlocks = [0], threading.Lock(), [0]
    threads = [threading.Thread(target=worker, args=(shape, done, lock, deadlocks))
               for _ in range(THREADS)]
    t = time.perf_counter()
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    secs = time.perf_counter() - t
    assert done[0] == JOBS, (shape, done[0])
    return JOBS / secs, deadlocks[0]


def redo(c):
    c.execute("SHOW GLOBAL STATUS LIKE 'Innodb_os_log_written'")
    return int(c.fetchone()[1])


SHAPES = sys.argv[3].split(",") if len(sys.argv) > 3 else ["status", "ready"]
for rnd in range(3):
    for shape in SHAPES:
        c = setup(shape)
        r0 = redo(c)
        e = enqueue(shape, c)
        r1 = redo(c)
        d, deadlocks = drain(shape)
        r2 = redo(c)
        c.execute("SELECT count(*) FROM shape_job")
        left = c.fetchone()[0]
        print(f"round {rnd + 1} {shape:>6}: enqueue {e:>8,.0f}/s ({(r1 - r0) / JOBS:,.0f} B redo/job), "
              f"drain {d:>8,.0f}/s ({(r2 - r1) / JOBS:,.0f} B redo/job, {deadlocks} deadlocks "
              f"retried), {left} rows left",
              flush=True)
c = connect().cursor()
c.execute("DROP TABLE IF EXISTS shape_job")
c.execute("DROP TABLE IF EXISTS shape_ready")
