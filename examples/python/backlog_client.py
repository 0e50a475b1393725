"""A producer and consumer of backlog queues in plain Python, speaking the SQL contract of
docs/sql.md directly: no backlog process, no HTTP, only a database driver.

    import backlog_client

    client = backlog_client.connect("postgres://postgres@127.0.0.1:5432/app")
    client.enqueue("emails", {"to": "a@example.com"})

    def send(job):              # return: ack; raise: nack (retried with backoff, then dead)
        print(job.id, job.attempt, job.payload)

    backlog_client.Consumer(client, "emails", send).run()

URLs: `sqlite:///abs/path.db` (or `sqlite://relative.db`), `postgres://…` (libpq's URL, passed to
psycopg as is), `mysql://user:password@host:port/database`. Drivers: `sqlite3` from the standard
library, `psycopg` (3.x) for PostgreSQL, `pymysql` for MySQL and MariaDB; only the one a URL needs
is imported.

The statements are the library's own, copied verbatim into QUERIES from
crates/backlog-sql/queries/<dialect>/ (backlog's test suite fails when a copy and its file differ).
The claim has one file per ordering (`job_claim_fifo.sql`, `job_claim_lifo.sql`). Before a
statement is sent, its list marker is filled in (`/*IDS*/` with one placeholder per id, as each
file's `-- @list` line declares) and, for the drivers whose placeholders differ from the file's,
the placeholders are rewritten: see `_placeholders`. Nothing else is ever formatted into SQL.

Guarantees, as for any consumer of the contract: at-least-once execution (a job whose worker dies
runs again after its lease expires) and fenced outcomes (an ack, nack or heartbeat counts only
while the claim's lease token still holds the job; `ack` returns False otherwise). See README.md.
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import re
import secrets
import socket
import sqlite3
import sys
import threading
import time
import urllib.parse
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator, Optional, Sequence

# The library's statements, copied verbatim from crates/backlog-sql/queries/<key>.
QUERIES: dict[str, str] = {}  # filled in below, after the code


class Cursors:
    """Where this client's FIFO claims start on each shard of a queue: past the largest key
    `(priority, run_at, id)` it claimed there, so that a claim does not walk the index entries
    completed jobs leave while another session holds an old snapshot (docs/sql.md, "Claim
    cursors"). Now and then a claim is a full pass from the head, which finds what lies behind
    a cursor: at least 20 times its own last duration after the previous one, at most 10 s."""

    FACTOR, MAX_GAP = 20, 10.0

    def __init__(self) -> None:
        self.keys: dict[tuple, dict[int, tuple]] = {}
        self.last_full: dict[tuple, float] = {}
        self.full_cost: dict[tuple, float] = {}
        self.floors: dict[tuple, int] = {}

    def plan(self, key: tuple) -> Optional[dict[int, tuple]]:
        """The cursors of the next claim by shard, or None for a full pass."""
        now, last = time.monotonic(), self.last_full.get(key)
        gap = min(self.FACTOR * self.full_cost.get(key, 0.0), self.MAX_GAP)
        if last is None or now - last >= gap:
            self.last_full[key] = now
            return None
        return dict(self.keys.get(key, {}))

    def record(self, key: tuple, full: bool, took: float, reached) -> None:
        """What a claim reached: (shard, key) pairs; a cursor never moves back."""
        if full:
            self.full_cost[key] = took
        shards = self.keys.setdefault(key, {})
        for shard, k in reached:
            if shard not in shards or k > shards[shard]:
                shards[shard] = k

    def rewind(self) -> None:
        """Jobs may lie behind the cursors (a retry due at once, a release, a rescue): the
        next claims are full passes."""
        self.last_full.clear()

    def floor(self, key: tuple) -> int:
        """Where a scan other than a claim starts, on the claims' schedule of full passes: the
        rescue looks only at leases that expired since its last complete pass (docs/sql.md,
        "Rescue of expired leases"). FULL_PASS for a full pass."""
        if self.plan(key) is None:
            return FULL_PASS
        return self.floors.get(key, FULL_PASS)

    def floor_record(self, key: tuple, full: bool, took: float, reached: Optional[int]) -> None:
        """What a scan made from `floor` reached, if anything: the floor never moves back."""
        if full:
            self.full_cost[key] = took
        if reached is not None:
            self.floors[key] = max(self.floors.get(key, FULL_PASS), reached)

#: A scan's floor for a full pass from the head: the smallest 64-bit integer.
FULL_PASS = -(1 << 63)
#: The rescue's key among the cursors' floors.
RESCUE_FLOOR = ("rescue",)
#: How often a consumer runs the rescue of expired leases, at most (docs/sql.md "How often").
RESCUE_EVERY_S = 1.0
#: Most expired leases one rescue statement moves.
RESCUE_BATCH = 1000
#: Defaults of a queue without a row in backlog_queue (docs/sql.md, table backlog_queue).
QUEUE_DEFAULTS = {
    "paused": False,
    "max_attempts": 25,
    "backoff_base_ms": 1000,
    "backoff_max_ms": 3_600_000,
    "lease_ms": 30_000,
    "ordering": "fifo",
    "retention": "keep",
}
#: The orderings a queue can have; the claim has a file for each.
ORDERINGS = ("fifo", "lifo")
#: The optional columns a plain INSERT may set (docs/sql.md "Enqueue from any language").
INSERT_COLUMNS = ("kind", "priority", "run_at", "max_attempts", "unique_key")


def now_us() -> int:
    """This machine's clock in microseconds since the epoch. Statements bind `Client.now_us()`
    instead: this clock moved onto the database's (see README.md "Clocks")."""
    return time.time_ns() // 1000


def new_token() -> int:
    """A fresh lease token: a random non-zero signed 64-bit integer, never reused."""
    while True:
        token = secrets.randbits(64) - (1 << 63)
        if token:
            return token


def default_owner() -> str:
    """What `lease_owner` records, as the library does: `host:pid`."""
    return f"{socket.gethostname()}:{os.getpid()}"


@dataclass
class Job:
    """A claimed job. `token` fences every outcome; `lost` and `cancel_requested` are set by
    heartbeats."""

    id: int
    queue: str
    kind: Optional[str]
    payload: Any
    priority: int
    attempt: int
    max_attempts: Optional[int]
    run_at: int
    created_at: int
    token: int
    lease_expires_at: int
    lost: bool = False
    cancel_requested: bool = False


class Retry(Exception):
    """Raised by a handler to fail this attempt and run the job again no earlier than `delay_s`
    seconds from now (instead of the queue's backoff)."""

    def __init__(self, message: str, delay_s: float):
        super().__init__(message)
        self.delay_s = delay_s


def _placeholders(text: str, pattern: str, replace: Callable[[re.Match], str]) -> str:
    """Rewrites the placeholders `pattern` matches into the driver's own and doubles every `%`
    (psycopg and PyMySQL treat `%` as their own marker everywhere). String literals and `--`
    comments keep their text: MySQL's rescue contains the literal '?' and some comments mention
    placeholders."""
    out, i, rx = [], 0, re.compile(pattern)
    while i < len(text):
        if text.startswith("--", i):
            end = text.find("\n", i)
            end = len(text) if end < 0 else end
        elif text[i] == "'":
            end = i + 1
            while True:
                end = text.index("'", end) + 1
                if not text.startswith("'", end):
                    break
                end += 1  # '' is a quote inside the literal
        else:
            m = rx.match(text, i)
            if m:
                out.append(replace(m))
                i = m.end()
            else:
                out.append("%%" if text[i] == "%" else text[i])
                i += 1
            continue
        out.append(text[i:end].replace("%", "%%"))
        i = end
    return "".join(out)


class _Dialect:
    """What differs between the databases: connecting, placeholders, and the statements an
    operation takes. Every method takes the connection to run on."""

    name: str
    insert_placeholder: str
    payload_placeholder: str

    def __init__(self) -> None:
        self._cache: dict[tuple, str] = {}

    def sql(self, name: str, order: str | None = None, ids: int = 0) -> str:
        """The statement `name` of this dialect (`name_ORDER` when an ordering is given), its
        list filled in, in the driver's placeholders."""
        key = (name, order, ids)
        if key not in self._cache:
            if order is not None and order not in ORDERINGS:
                raise ValueError(f"unknown ordering {order!r}")
            file = name if order is None else f"{name}_{order}"
            text = QUERIES[f"{self.name}/{file}.sql"]
            text = text.replace("/*IDS*/", ", ".join(["?"] * ids))
            self._cache[key] = self.translate(text)
        return self._cache[key]

    def translate(self, text: str) -> str:
        return text

    def transient(self, err: Exception) -> bool:
        """Whether `err` rolled back a transaction that can simply run again (a deadlock)."""
        return False


class _Sqlite(_Dialect):
    # sqlite3 binds the files' numbered `?N` from a sequence as they are.
    name = "sqlite"
    insert_placeholder = payload_placeholder = "?"

    def __init__(self, path: str) -> None:
        super().__init__()
        self.path = path

    def connect(self) -> sqlite3.Connection:
        # Autocommit (isolation_level=None): every statement commits unless inside BEGIN.
        # WAL, synchronous FULL and a 30 s busy timeout, as the library opens it (docs/sql.md
        # "Session settings"): writers queue on the lock instead of failing at once.
        conn = sqlite3.connect(self.path, isolation_level=None, timeout=30.0)
        conn.execute("PRAGMA busy_timeout = 30000")
        conn.execute("PRAGMA journal_mode = WAL")
        conn.execute("PRAGMA synchronous = FULL")
        return conn

    @contextlib.contextmanager
    def transaction(self, conn: sqlite3.Connection) -> Iterator[None]:
        # IMMEDIATE: take the write lock at BEGIN (waiting per busy_timeout), so a transaction
        # never fails to upgrade from reader to writer halfway.
        conn.execute("BEGIN IMMEDIATE")
        try:
            yield
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        conn.execute("COMMIT")

    def db_now_sql(self) -> str:
        # SQLite's clock ticks in milliseconds: read as the last microsecond of its millisecond,
        # so this client's time is never behind the column defaults' (db_now.sql).
        return ("SELECT CAST(ROUND((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER)"
                " * 1000 + 999")

    def claim(self, conn, queue, token, owner, expires, now, kinds, limit, order, after):
        # One writer, which rewrites rows in place: nothing piles up before the head, no cursor.
        kinds = None if kinds is None else json.dumps(list(kinds))
        params = (token, owner, expires, now, queue, kinds, limit)
        return conn.execute(self.sql("job_claim", order), params).fetchall(), []

    def complete(self, conn, retention, job, now):
        pairs = json.dumps([[job.id, job.token]])
        if retention == "delete":
            rows = conn.execute(self.sql("job_complete_delete"), (pairs,)).fetchall()
        elif retention == "keep":
            rows = conn.execute(self.sql("job_complete_keep"), (pairs, now)).fetchall()
        else:  # archive: copy, then delete, in one transaction
            with self.transaction(conn):
                conn.execute(self.sql("job_complete_archive"), (pairs, now))
                rows = conn.execute(self.sql("job_complete_delete"), (pairs,)).fetchall()
        return len(rows) == 1

    def fail(self, conn, job, state, run_at, finished_at, now, error):
        params = (state, run_at, finished_at, now, error, job.id, job.token)
        return conn.execute(self.sql("job_fail"), params).rowcount == 1

    def heartbeat(self, conn, job, expires):
        rows = conn.execute(self.sql("job_heartbeat"), (expires, job.id, job.token)).fetchall()
        return (True, bool(rows[0][0])) if rows else (False, False)

    def release(self, conn, job, run_at):
        return conn.execute(self.sql("job_release"), (run_at, job.id, job.token)).rowcount == 1

    def rescue(self, conn, now, limit, after):
        return len(conn.execute(self.sql("job_rescue"), (now, limit, after)).fetchall())

    def queue_row(self, conn, queue):
        return conn.execute(self.sql("queue_get"), (queue,)).fetchone()


class _Postgres(_Dialect):
    # psycopg takes `%(name)s`: the files' `$N` become `%(pN)s`, so a number used twice is one
    # parameter, bound once, as in the file.
    name = "postgres"
    insert_placeholder = "%s"
    payload_placeholder = "%s::jsonb"  # docs/sql.md: a payload bound as text needs the cast

    def __init__(self, url: str) -> None:
        super().__init__()
        import psycopg

        self.url, self.psycopg = url, psycopg

    def translate(self, text: str) -> str:
        return _placeholders(text, r"\$(\d+)", lambda m: f"%(p{m.group(1)})s")

    @staticmethod
    def params(*values: Any) -> dict[str, Any]:
        """Positional values as the `pN` the translated statement names."""
        return {f"p{i}": v for i, v in enumerate(values, start=1)}

    def connect(self):
        # Nothing to set (docs/sql.md "Session settings"); backlog.notify is left on so that this
        # process's inserts wake the workers through the trigger.
        return self.psycopg.connect(self.url, autocommit=True)

    def transaction(self, conn):
        return conn.transaction()

    def transient(self, err: Exception) -> bool:
        errors = self.psycopg.errors
        return isinstance(err, (errors.DeadlockDetected, errors.SerializationFailure))

    def db_now_sql(self) -> str:
        return "SELECT CAST(EXTRACT(EPOCH FROM clock_timestamp()) * 1000000 AS BIGINT)"

    def _run(self, conn, name, *values, order=None):
        return conn.execute(self.sql(name, order), self.params(*values))

    def claim(self, conn, queue, token, owner, expires, now, kinds, limit, order, after):
        kinds = None if kinds is None else list(kinds)
        if order != "fifo":
            cur = self._run(conn, "job_claim", token, owner, expires, now, queue, kinds, limit,
                            order=order)
            return cur.fetchall(), []
        # The cursors as the statement takes them: three values a shard from shard 0, the
        # smallest key where a shard has none; empty for a full pass.
        flat = []
        for shard in range(max(after, default=-1) + 1):
            flat += after.get(shard, (-32768, -2**63, -2**63))
        rows = self._run(conn, "job_claim", token, owner, expires, now, queue, kinds, limit, flat,
                         order=order).fetchall()
        return rows, [(r[10], (r[3], r[6], r[0])) for r in rows]

    def complete(self, conn, retention, job, now):
        name = {"delete": "job_complete_delete", "keep": "job_complete_keep",
                "archive": "job_complete_archive"}[retention]
        if retention == "delete":
            cur = self._run(conn, name, [job.id], [job.token])
        else:
            cur = self._run(conn, name, [job.id], [job.token], now)
        return len(cur.fetchall()) == 1

    def fail(self, conn, job, state, run_at, finished_at, now, error):
        cur = self._run(conn, "job_fail", state, run_at, finished_at, now, error, job.id,
                        job.token)
        return cur.rowcount == 1

    def heartbeat(self, conn, job, expires):
        rows = self._run(conn, "job_heartbeat", expires, job.id, job.token).fetchall()
        return (True, bool(rows[0][0])) if rows else (False, False)

    def release(self, conn, job, run_at):
        return self._run(conn, "job_release", run_at, job.id, job.token).rowcount == 1

    def rescue(self, conn, now, limit, after):
        return len(self._run(conn, "job_rescue", now, limit, after).fetchall())

    def queue_row(self, conn, queue):
        return self._run(conn, "queue_get", queue).fetchone()


class _MySql(_Dialect):
    # PyMySQL takes `%s`: the files' positional `?` become `%s`, in order.
    name = "mysql"
    insert_placeholder = payload_placeholder = "%s"

    def __init__(self, url: str) -> None:
        super().__init__()
        import pymysql

        self.pymysql = pymysql
        u = urllib.parse.urlsplit(url)
        self.args = {
            "host": u.hostname or "127.0.0.1",
            "port": u.port or 3306,
            "user": urllib.parse.unquote(u.username or "root"),
            "password": urllib.parse.unquote(u.password or ""),
            "database": urllib.parse.unquote(u.path.lstrip("/")),
        }

    def translate(self, text: str) -> str:
        return _placeholders(text, r"\?", lambda m: "%s")

    def connect(self):
        pymysql = self.pymysql
        # FOUND_ROWS: an UPDATE reports the rows its WHERE matched, so a fenced statement that
        # writes values a row already has still counts 1 (docs/sql.md "Session settings").
        conn = pymysql.connect(
            **self.args,
            charset="utf8mb4",
            autocommit=True,
            client_flag=pymysql.constants.CLIENT.FOUND_ROWS,
        )
        with conn.cursor() as cur:
            # READ COMMITTED: no gap locks between claimers and producers. UTC, so NOW(6) in the
            # column defaults has no daylight-saving hour that maps to two instants.
            cur.execute("SET SESSION TRANSACTION ISOLATION LEVEL READ COMMITTED")
            cur.execute("SET time_zone = '+00:00'")
        return conn

    @contextlib.contextmanager
    def transaction(self, conn) -> Iterator[None]:
        conn.begin()
        try:
            yield
        except BaseException:
            conn.rollback()
            raise
        conn.commit()

    def transient(self, err: Exception) -> bool:
        # 1213 deadlock (InnoDB rolled the transaction back), 1205 lock wait timeout.
        return isinstance(err, self.pymysql.err.OperationalError) and err.args[0] in (1213, 1205)

    def db_now_sql(self) -> str:
        return "SELECT CAST(UNIX_TIMESTAMP(NOW(6)) * 1000000 AS SIGNED)"

    def _run(self, conn, name, params, order=None, ids=0):
        cur = conn.cursor()
        cur.execute(self.sql(name, order, ids), params)
        return cur

    def claim(self, conn, queue, token, owner, expires, now, kinds, limit, order, after):
        # No UPDATE … RETURNING: lock the rows with SKIP LOCKED, then mark them, in one
        # transaction. The SELECT already shows the attempt the UPDATE writes.
        kinds = None if kinds is None else json.dumps(list(kinds))
        reached = []
        with self.transaction(conn):
            # The queue's claim point lies on `shards` heads: from a random one, each in turn.
            n = self._run(conn, "queue_shards", (queue,)).fetchone()[0]
            first, rows = random.randrange(n), []
            for k in range(n):
                shard = (first + k) % n
                if order == "fifo":
                    p, r, i = after.get(shard, (None, None, None))
                    params = (queue, shard, now, kinds, kinds, p, p, p, r, r, i, queue,
                              limit - len(rows))
                else:
                    params = (queue, shard, now, kinds, kinds, queue, limit - len(rows))
                got = self._run(conn, "job_claim", params, order=order).fetchall()
                if got:
                    last = got[-1]
                    reached.append((shard, (last[3], last[6], last[0])))
                rows += got
                if len(rows) == limit:
                    break
            if rows:
                ids = [r[0] for r in rows]
                self._run(conn, "job_claim_update", (token, owner, expires, now, *ids),
                          ids=len(ids))
        return rows, reached

    def complete(self, conn, retention, job, now):
        if retention == "delete":
            cur = self._run(conn, "job_complete_delete_fenced", (job.id, job.token), ids=1)
            return cur.rowcount == 1
        # keep and archive: lock the row, check it is still ours, copy it where it is kept (keep:
        # the completed jobs' ring, through the view backlog_job_done_current, schema version
        # 17), delete it.
        copy = {"keep": "job_complete_keep", "archive": "job_complete_archive"}[retention]
        with self.transaction(conn):
            row = self._run(conn, "job_complete_lock", (job.id,), ids=1).fetchone()
            if row is None or row[1] != job.token or row[2] != "running":
                return False
            self._run(conn, copy, (now, job.id), ids=1)
            self._run(conn, "job_complete_delete", (job.id,), ids=1)
        return True

    def fail(self, conn, job, state, run_at, finished_at, now, error):
        params = (now, error, state, state, run_at, finished_at, job.id, job.token)
        return self._run(conn, "job_fail", params).rowcount == 1

    def heartbeat(self, conn, job, expires):
        # No RETURNING: the fenced UPDATE (matched rows, thanks to FOUND_ROWS), then the flag,
        # fenced again.
        if self._run(conn, "job_heartbeat", (expires, job.id, job.token)).rowcount != 1:
            return False, False
        row = self._run(conn, "job_heartbeat_cancel", (job.id, job.token)).fetchone()
        return (True, bool(row[0])) if row else (False, False)

    def release(self, conn, job, run_at):
        return self._run(conn, "job_release", (run_at, job.id, job.token)).rowcount == 1

    def rescue(self, conn, now, limit, after):
        # Lock a batch of expired leases, SKIP LOCKED, then update those rows by id.
        with self.transaction(conn):
            ids = [r[0] for r in self._run(conn, "job_rescue_ids",
                                            (now, after, limit, now, limit)).fetchall()]
            if not ids:
                return 0
            cur = self._run(conn, "job_rescue", (now, now, now, *ids, now), ids=len(ids))
            return cur.rowcount

    def queue_row(self, conn, queue):
        return self._run(conn, "queue_get", (queue,)).fetchone()


def _dialect(url: str) -> _Dialect:
    if url.startswith("sqlite://"):
        return _Sqlite(url[len("sqlite://"):].split("?", 1)[0])
    if url.startswith(("postgres://", "postgresql://")):
        return _Postgres(url)
    if url.startswith(("mysql://", "mariadb://")):
        return _MySql(url)
    raise ValueError(f"expected sqlite://PATH, postgres://… or mysql://…, not {url!r}")


def connect(url: str) -> "Client":
    """Opens one connection to the queue database the URL names."""
    return Client(url)


class Client:
    """One connection and the contract's operations on it. Not shared between threads: give each
    thread its own (`Client(url)`), as the Consumer does for its heartbeats."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.cursors = Cursors()
        self.dialect = _dialect(url)
        self.conn = self.dialect.connect()
        self._in_transaction = False
        self.offset_us, self._synced = 0, time.monotonic()
        self.sync_clock()

    def close(self) -> None:
        self.conn.close()

    @contextlib.contextmanager
    def transaction(self) -> Iterator[Any]:
        """A transaction on this client's connection (yielded, for your own statements): jobs
        enqueued inside it exist exactly when it commits."""
        with self.dialect.transaction(self.conn):
            self._in_transaction = True
            try:
                yield self.conn
            finally:
                self._in_transaction = False

    def _retrying(self, op: Callable[[], Any]) -> Any:
        """Runs `op` again when the database rolled it back as a deadlock victim (it changed
        nothing), as the library does. Not inside a caller's transaction, which is rolled back."""
        for attempt in range(10):
            try:
                return op()
            except Exception as err:  # noqa: BLE001 - re-raised unless transient
                if self._in_transaction or not self.dialect.transient(err) or attempt == 9:
                    raise
                time.sleep(random.uniform(0.001, 0.01) * (attempt + 1))

    # ---- producing

    def enqueue(self, queue: str, payload: Any, **columns: Any) -> int:
        """Enqueues one job with the plain INSERT of docs/sql.md and returns its id. `payload` is
        any value `json.dumps` takes. Optional columns: kind, priority,
        run_at (µs), max_attempts, unique_key; the others take their defaults."""
        d = self.dialect
        names = ["queue", "payload"]
        values = [queue, json.dumps(payload)]
        for name, value in columns.items():
            if name not in INSERT_COLUMNS:
                raise TypeError(f"enqueue: unknown column {name!r}")
            names.append(name)
            values.append(value)
        marks = [d.insert_placeholder, d.payload_placeholder] + [d.insert_placeholder] * (
            len(names) - 2
        )
        sql = f"INSERT INTO backlog_job ({', '.join(names)}) VALUES ({', '.join(marks)})"
        if isinstance(d, _Postgres):
            # psycopg has no lastrowid: ask for the id.
            return self.conn.execute(sql + " RETURNING id", values).fetchone()[0]
        cur = self.conn.cursor()
        cur.execute(sql, values)
        return cur.lastrowid

    # ---- consuming: each outcome is fenced by the claim's token

    def queue_settings(self, queue: str) -> dict[str, Any]:
        """The queue's row of backlog_queue, or the defaults when it has none."""
        row = self.dialect.queue_row(self.conn, queue)
        if row is None:
            return dict(QUEUE_DEFAULTS)
        keys = ("name", "paused", "max_attempts", "backoff_base_ms", "backoff_max_ms",
                "lease_ms", "ordering", "retention", "concurrency")
        settings = dict(zip(keys, row))
        settings["paused"] = bool(settings["paused"])
        return settings

    def claim(self, queue: str, limit: int, *, owner: Optional[str] = None,
              lease_ms: Optional[int] = None, kinds: Optional[Sequence[str]] = None,
              settings: Optional[dict] = None) -> list[Job]:
        """Claims up to `limit` due jobs of `queue` with the claim statement of the dialect,
        under one fresh lease token. `kinds`: only jobs of these kinds (None: any)."""
        settings = settings or self.queue_settings(queue)
        lease_us = (lease_ms or settings["lease_ms"]) * 1000
        token, now = new_token(), self.now_us()
        expires = now + lease_us
        order = settings["ordering"]
        cursors_key = (queue, tuple(kinds or ()))
        after, started = self.cursors.plan(cursors_key), time.monotonic()
        rows, reached = self._retrying(lambda: self.dialect.claim(
            self.conn, queue, token, owner or default_owner(), expires, now, kinds, limit,
            order, {} if after is None else after))
        if order == "fifo":
            self.cursors.record(cursors_key, after is None, time.monotonic() - started, reached)
        jobs = [
            Job(id=r[0], queue=queue, kind=r[1], payload=json.loads(r[2]), priority=r[3],
                attempt=r[4], max_attempts=r[5], run_at=r[6], created_at=r[7], token=token,
                lease_expires_at=expires)
            for r in rows
        ]
        # UPDATE … RETURNING gives rows in no particular order: claim order again.
        key = (lambda j: (j.priority, j.run_at, j.id)) if settings["ordering"] == "fifo" else (
            lambda j: (j.priority, -j.run_at, -j.id))
        return sorted(jobs, key=key)

    def ack(self, job: Job, *, retention: Optional[str] = None) -> bool:
        """Completes the job (what that does follows the queue's retention). True when it was
        completed; False when the lease was lost (the job was rescued and is someone else's, or
        is gone): nothing changed, and the job must not be reported again."""
        retention = retention or self.queue_settings(job.queue)["retention"]
        now = self.now_us()
        return self._retrying(lambda: self.dialect.complete(self.conn, retention, job, now))

    def nack(self, job: Job, error: str, *, retry_at: Optional[int] = None,
             settings: Optional[dict] = None) -> str:
        """Fails this attempt with `error`: a retry at `retry_at` (µs; default the queue's backoff),
        or dead when it was the last attempt. Returns 'retry', 'dead', or 'lost' (the lease was
        lost; nothing changed)."""
        settings = settings or self.queue_settings(job.queue)
        now = self.now_us()
        limit = job.max_attempts or settings["max_attempts"]
        if job.attempt >= limit:
            state, run_at, finished_at = "dead", now, now
        else:
            state, finished_at = "available", None
            run_at = retry_at if retry_at is not None else now + backoff_us(job.attempt, settings)
        held = self._retrying(lambda: self.dialect.fail(
            self.conn, job, state, run_at, finished_at, now, error))
        if state == "available" and run_at <= now:
            self.cursors.rewind()  # due at once, where it was: behind the cursor
        return ("dead" if state == "dead" else "retry") if held else "lost"

    def cancelled(self, job: Job, reason: str = "cancelled") -> bool:
        """Answers a requested cancel: the fail statement with the state `cancelled`."""
        now = self.now_us()
        return self._retrying(lambda: self.dialect.fail(
            self.conn, job, "cancelled", now, now, now, reason))

    def heartbeat(self, job: Job, *, lease_ms: Optional[int] = None) -> bool:
        """Extends the job's lease to now + lease. False when the lease was lost: stop the job and
        report nothing. Sets `job.cancel_requested` when its cancellation was requested."""
        lease_us = (lease_ms or self.queue_settings(job.queue)["lease_ms"]) * 1000
        expires = self.now_us() + lease_us
        held, cancel = self._retrying(lambda: self.dialect.heartbeat(self.conn, job, expires))
        if held:
            job.lease_expires_at = expires
            job.cancel_requested = job.cancel_requested or cancel
        else:
            job.lost = True
        return held

    def release(self, job: Job, run_at: Optional[int] = None) -> bool:
        """Gives the job back without using an attempt, to run again at `run_at` (default now)."""
        run_at = self.now_us() if run_at is None else run_at
        self.cursors.rewind()  # the job is available again where it was: behind the cursor
        return self._retrying(lambda: self.dialect.release(self.conn, job, run_at))

    def rescue(self, limit: int = RESCUE_BATCH) -> int:
        """Makes jobs whose lease expired available again (or dead after their last attempt).
        Safe from any number of processes at once. Returns how many it moved."""
        now, started = self.now_us(), time.monotonic()
        after = self.cursors.floor(RESCUE_FLOOR)
        moved = self._retrying(lambda: self.dialect.rescue(self.conn, now, limit, after))
        # Below its limit, the pass found every lease that expired before `now`.
        reached = now if moved < limit else None
        self.cursors.floor_record(RESCUE_FLOOR, after == FULL_PASS, time.monotonic() - started,
                                  reached)
        if moved:
            self.cursors.rewind()
        return moved

    def pending(self, queue: str) -> int:
        """Jobs of the queue that are available (due or not) or running: 0 means drained."""
        d = self.dialect
        sql = ("SELECT COUNT(*) FROM backlog_job WHERE queue = "
               f"{d.insert_placeholder} AND state IN ('available', 'running')")
        cur = self.conn.cursor()
        cur.execute(sql, (queue,))
        return cur.fetchone()[0]

    def now_us(self) -> int:
        """The database's time in microseconds since the epoch: this machine's clock plus the
        offset `sync_clock` measured. Every statement binds it as `now`, so consumers whose
        clocks disagree still agree on leases and due times."""
        if time.monotonic() - self._synced > 60 and not self._in_transaction:
            self.sync_clock()
        return now_us() + self.offset_us

    def sync_clock(self) -> int:
        """Measures the database's clock minus this machine's, in µs (the best of three round
        trips; exact to half of one), keeps it for `now_us`, and returns it. Done when the client
        connects; a long-lived consumer does it again every minute."""
        best = None
        for _ in range(3):
            before = now_us()
            cur = self.conn.cursor()
            cur.execute(self.dialect.db_now_sql())
            db_now = cur.fetchone()[0]
            after = now_us()
            if best is None or after - before < best[1]:
                best = (db_now - (before + after) // 2, after - before)
        self.offset_us = best[0]
        self._synced = time.monotonic()
        return self.offset_us


def backoff_us(attempt: int, settings: dict) -> int:
    """The retry delay after attempt `attempt`: min(base · 2^(attempt−1), max), then a uniformly
    random point between half of that and all of it (docs/sql.md "Nack")."""
    ms = min(settings["backoff_base_ms"] * 2 ** max(attempt - 1, 0), settings["backoff_max_ms"])
    return int(random.uniform(ms / 2, ms) * 1000)


class _Heartbeats(threading.Thread):
    """Extends the leases of the jobs a consumer holds, every third of the lease, on its own
    connection, so a long job (or one waiting its turn in a batch) keeps its lease."""

    def __init__(self, url: str, lease_ms: int) -> None:
        super().__init__(daemon=True, name="backlog-heartbeats")
        self.url, self.lease_ms = url, lease_ms
        self.held: dict[int, Job] = {}
        self.lock = threading.Lock()
        self.stop = threading.Event()
        self.error: Optional[BaseException] = None

    def hold(self, jobs: list[Job]) -> None:
        with self.lock:
            self.held.update((j.id, j) for j in jobs)

    def drop(self, job: Job) -> None:
        with self.lock:
            self.held.pop(job.id, None)

    def run(self) -> None:
        try:
            client = Client(self.url)  # opened here: an sqlite3 connection stays in its thread
        except BaseException as err:
            self.error = err
            return
        try:
            while not self.stop.wait(self.lease_ms / 3000):
                with self.lock:
                    jobs = list(self.held.values())
                for job in jobs:
                    if not client.heartbeat(job, lease_ms=self.lease_ms):
                        self.drop(job)
        except BaseException as err:  # the consumer stops when its heartbeats cannot run
            self.error = err
        finally:
            client.close()


Outcome = str  # 'completed', 'retry', 'dead', 'cancelled' or 'lost'


class Consumer:
    """Claims batches of one queue and runs `handler(job)` for each: a return acks the job, an
    exception nacks it (`Retry` chooses when it runs again). `on_outcome(job, outcome)`, if
    given, hears what became of each job; 'lost' means its lease was lost and another worker
    owns it (the outcome was not recorded)."""

    def __init__(self, client: Client, queue: str, handler: Callable[[Job], Any], *,
                 batch: int = 10, kinds: Optional[Sequence[str]] = None,
                 owner: Optional[str] = None, lease_ms: Optional[int] = None,
                 poll_max_s: float = 1.0,
                 on_outcome: Optional[Callable[[Job, Outcome], None]] = None) -> None:
        self.client, self.queue, self.handler = client, queue, handler
        self.batch, self.kinds, self.owner = batch, kinds, owner or default_owner()
        self.lease_ms, self.poll_max_s = lease_ms, poll_max_s
        self.on_outcome = on_outcome or (lambda job, outcome: None)
        self.stop = threading.Event()
        self._last_rescue = 0.0

    def run(self, *, drain: bool = False) -> None:
        """Works until `self.stop` is set, or, with `drain`, until the queue has no job available
        (due or not) or running."""
        skew = self.client.sync_clock()
        if abs(skew) > 1_000_000:
            print(f"backlog_client: this clock is {-skew / 1e6:+.1f} s off the database's; "
                  "this consumer reads the database's time, but fix the clock (NTP)",
                  file=sys.stderr)
        settings = self.client.queue_settings(self.queue)
        lease_ms = self.lease_ms or settings["lease_ms"]
        beats = _Heartbeats(self.client.url, lease_ms)
        beats.start()
        idle, refreshed = 0.05, time.monotonic()
        try:
            while not self.stop.is_set():
                if beats.error is not None:
                    raise RuntimeError("heartbeats failed") from beats.error
                if time.monotonic() - refreshed > 5:
                    settings, refreshed = self.client.queue_settings(self.queue), time.monotonic()
                self._rescue_now_and_then()
                jobs = self.client.claim(self.queue, self.batch, owner=self.owner,
                                         lease_ms=lease_ms, kinds=self.kinds, settings=settings)
                if not jobs:
                    if drain and self.client.pending(self.queue) == 0:
                        return
                    self.stop.wait(idle)
                    idle = min(idle * 2, self.poll_max_s)
                    continue
                idle = 0.05
                beats.hold(jobs)
                for i, job in enumerate(jobs):
                    if self.stop.is_set():
                        for rest in jobs[i:]:
                            beats.drop(rest)
                            self.client.release(rest)
                        break
                    self._run_one(job, settings)
                    beats.drop(job)
        finally:
            beats.stop.set()
            beats.join()

    def _rescue_now_and_then(self) -> None:
        # Rescue before claiming, at most once a second, as the library does: with no Rust
        # process alongside, nobody else would recover a crashed worker's jobs.
        if time.monotonic() - self._last_rescue >= RESCUE_EVERY_S:
            self._last_rescue = time.monotonic()
            self.client.rescue()

    def _run_one(self, job: Job, settings: dict) -> None:
        if job.lost:
            self.on_outcome(job, "lost")
            return
        try:
            if not job.cancel_requested:
                self.handler(job)
        except Retry as r:
            retry_at = self.client.now_us() + int(r.delay_s * 1_000_000)
            outcome = self.client.nack(job, str(r), retry_at=retry_at, settings=settings)
        except Exception as err:  # noqa: BLE001 - a failed attempt, recorded on the job
            outcome = self.client.nack(job, f"{type(err).__name__}: {err}", settings=settings)
        else:
            if job.cancel_requested:
                outcome = "cancelled" if self.client.cancelled(job) else "lost"
            else:
                held = self.client.ack(job, retention=settings["retention"])
                outcome = "completed" if held else "lost"
        self.on_outcome(job, outcome)


def _main(argv: list[str]) -> int:
    import argparse

    p = argparse.ArgumentParser(prog="backlog_client.py", description=__doc__.split("\n")[0])
    sub = p.add_subparsers(dest="command", required=True)
    e = sub.add_parser("enqueue", help="enqueue JSON payloads with the plain INSERT")
    e.add_argument("url")
    e.add_argument("queue")
    e.add_argument("payloads", nargs="*", help="JSON payloads")
    e.add_argument("--jsonl", help="a file of payloads, one JSON value a line")
    a = p.parse_args(argv)
    client = connect(a.url)
    payloads = list(a.payloads)
    if a.jsonl:
        with open(a.jsonl) as f:
            payloads += [line.strip() for line in f if line.strip()]
    values = [json.loads(payload) for payload in payloads]  # all JSON, before any is written
    with client.transaction():  # all or nothing
        ids = [client.enqueue(a.queue, value) for value in values]
    print(len(ids))
    return 0


# --- QUERIES: verbatim copies of crates/backlog-sql/queries/<key> ---------------------------
QUERIES["sqlite/job_claim_fifo.sql"] = """\
-- Claims up to `limit` due jobs of a queue under one new lease, FIFO: by priority, then due time,
-- then id. `kinds`: a JSON array, NULL for any kind. One statement: SQLite has a single writer, so
-- the picked rows cannot be taken by anyone else.
-- The claim of the SQL contract, for clients in other languages (examples/python): their driver
-- reads a result's rows where it runs. This library marks the rows and reads them back as one
-- row (job_claim_json_fifo), the same jobs.
-- @external
-- @param token: i64
-- @param owner: &str
-- @param expires: i64
-- @param now: i64
-- @param queue: &str
-- @param kinds: Option<String>
-- @param limit: i64
UPDATE backlog_job
SET state = 'running', attempt = attempt + 1, lease_token = ?1, lease_owner = ?2,
    lease_expires_at = ?3, attempted_at = ?4
WHERE id IN (
    SELECT id FROM backlog_job
    WHERE queue = ?5 AND state = 'available' AND run_at <= ?4
      AND (?6 IS NULL OR kind IN (SELECT value FROM json_each(?6)))
      AND NOT EXISTS (SELECT 1 FROM backlog_queue WHERE name = ?5 AND (paused = 1 OR global_concurrency IS NOT NULL
                                                                       OR rate_limit IS NOT NULL OR group_rate_limit IS NOT NULL))
    ORDER BY priority, run_at, id
    LIMIT +?7
)
-- Not the queue, token or lease expiry: the claimer chose them.
RETURNING id, kind, payload, priority, attempt, max_attempts, run_at, created_at, trace_context, group_key
"""
QUERIES["sqlite/job_claim_lifo.sql"] = """\
-- Claims up to `limit` due jobs of a queue under one new lease, LIFO: by priority, then latest due
-- time first, then highest id. `kinds`: a JSON array, NULL for any kind. One statement: SQLite has
-- a single writer, so the picked rows cannot be taken by anyone else.
-- The claim of the SQL contract, for clients in other languages (examples/python): their driver
-- reads a result's rows where it runs. This library marks the rows and reads them back as one
-- row (job_claim_json_lifo), the same jobs.
-- @external
-- @param token: i64
-- @param owner: &str
-- @param expires: i64
-- @param now: i64
-- @param queue: &str
-- @param kinds: Option<String>
-- @param limit: i64
UPDATE backlog_job
SET state = 'running', attempt = attempt + 1, lease_token = ?1, lease_owner = ?2,
    lease_expires_at = ?3, attempted_at = ?4
WHERE id IN (
    SELECT id FROM backlog_job
    WHERE queue = ?5 AND state = 'available' AND run_at <= ?4
      AND (?6 IS NULL OR kind IN (SELECT value FROM json_each(?6)))
      AND NOT EXISTS (SELECT 1 FROM backlog_queue WHERE name = ?5 AND (paused = 1 OR global_concurrency IS NOT NULL
                                                                       OR rate_limit IS NOT NULL OR group_rate_limit IS NOT NULL))
    ORDER BY priority, run_at DESC, id DESC
    LIMIT +?7
)
-- Not the queue, token or lease expiry: the claimer chose them.
RETURNING id, kind, payload, priority, attempt, max_attempts, run_at, created_at, trace_context, group_key
"""

QUERIES["sqlite/job_complete_delete.sql"] = """\
-- Completes running jobs whose lease tokens still match: deletes them, returning their ids.
-- `pairs`: the (id, lease_token) pairs as a JSON array of two-element arrays. One statement text
-- for any batch size; each pair is looked up by primary key (never a scan of the running jobs).
-- @param pairs: &str
DELETE FROM backlog_job
WHERE id IN (
    SELECT b.id FROM json_each(?1) AS p
    JOIN backlog_job AS b ON b.id = p.value ->> 0
    WHERE b.lease_token = p.value ->> 1 AND b.state = 'running'
)
RETURNING id
"""

QUERIES["sqlite/job_complete_keep.sql"] = """\
-- Completes running jobs whose lease tokens still match: marks them completed, kept, returning
-- their ids. `pairs`: the (id, lease_token) pairs as JSON (see job_complete_delete).
-- @param pairs: &str
-- @param now: i64
UPDATE backlog_job
SET state = 'completed', finished_at = ?2, lease_token = NULL, lease_expires_at = NULL
WHERE id IN (
    SELECT b.id FROM json_each(?1) AS p
    JOIN backlog_job AS b ON b.id = p.value ->> 0
    WHERE b.lease_token = p.value ->> 1 AND b.state = 'running'
)
RETURNING id
"""

QUERIES["sqlite/job_complete_archive.sql"] = """\
-- Copies running jobs whose lease tokens still match into the archive, completed. `pairs`: the
-- (id, lease_token) pairs as JSON (see job_complete_delete). The DELETE of job_complete_delete
-- follows in the same transaction.
-- @param pairs: &str
-- @param now: i64
INSERT INTO backlog_job_archive
    (id, queue, kind, payload, state, priority, run_at, attempt, max_attempts, lease_token,
     lease_owner, lease_expires_at, unique_key, errors, result, progress, created_at,
     attempted_at, finished_at, cancel_requested_at, trace_context, group_key)
SELECT id, queue, kind, payload, 'completed', priority, run_at, attempt, max_attempts, NULL,
       lease_owner, NULL, unique_key, errors, result, progress, created_at, attempted_at, ?2,
       cancel_requested_at, trace_context, group_key
FROM backlog_job
WHERE id IN (
    SELECT b.id FROM json_each(?1) AS p
    JOIN backlog_job AS b ON b.id = p.value ->> 0
    WHERE b.lease_token = p.value ->> 1 AND b.state = 'running'
)
"""

QUERIES["sqlite/job_fail.sql"] = """\
-- A failed attempt of a job whose lease token still matches: retried (available at `run_at`),
-- dead or cancelled (finished at `finished_at`), the error appended to its errors.
-- @param state: &str
-- @param run_at: i64
-- @param finished_at: Option<i64>
-- @param now: i64
-- @param error: &str
-- @param id: i64
-- @param token: i64
-- A failed job of an ordered group whose queue lets the group go on (group_on_failure 'next')
-- waits for its group's turn again instead of holding its group's place while it waits to retry.
UPDATE backlog_job
SET state = CASE WHEN ?1 = 'available' AND group_key IS NOT NULL
                  AND (SELECT q.group_on_failure FROM backlog_queue q WHERE q.name = backlog_job.queue) = 'next'
             THEN 'waiting' ELSE ?1 END,
    run_at = ?2, finished_at = ?3, lease_token = NULL, lease_expires_at = NULL,
    errors = json_insert(errors, '$[#]', json_object('attempt', attempt, 'at', ?4, 'error', ?5))
WHERE id = ?6 AND lease_token = ?7 AND state = 'running'
"""

QUERIES["sqlite/job_heartbeat.sql"] = """\
-- Extends the lease of a job whose lease token still matches. Also tells the worker whether
-- cancellation of the job was requested.
-- @param expires: i64
-- @param id: i64
-- @param token: i64
UPDATE backlog_job SET lease_expires_at = ?1
WHERE id = ?2 AND lease_token = ?3 AND state = 'running'
RETURNING cancel_requested_at IS NOT NULL AS cancel_requested
"""

QUERIES["sqlite/job_release.sql"] = """\
-- Back to available without consuming the attempt the claim counted.
-- @param run_at: i64
-- @param id: i64
-- @param token: i64
UPDATE backlog_job
SET state = 'available', attempt = MAX(attempt - 1, 0), run_at = ?1,
    lease_token = NULL, lease_expires_at = NULL
WHERE id = ?2 AND lease_token = ?3 AND state = 'running'
"""

QUERIES["sqlite/job_rescue.sql"] = """\
-- Expired leases: back to available, or dead when the attempt that died was the last one.
-- Returns the queue of each job rescued and whether it ended dead (for the per-queue counts).
-- After: the rescue's floor, as on PostgreSQL (the smallest integer: a full pass).
-- @param now: i64
-- @param limit: i64
-- @param after: i64
UPDATE backlog_job
SET state = CASE WHEN attempt >= COALESCE(max_attempts,
                     (SELECT q.max_attempts FROM backlog_queue q WHERE q.name = backlog_job.queue), 25)
                 THEN 'dead' ELSE 'available' END,
    finished_at = CASE WHEN attempt >= COALESCE(max_attempts,
                     (SELECT q.max_attempts FROM backlog_queue q WHERE q.name = backlog_job.queue), 25)
                 THEN ?1 ELSE NULL END,
    run_at = ?1,
    errors = json_insert(errors, '$[#]', json_object('attempt', attempt, 'at', ?1,
             'error', 'lease expired (worker ' || COALESCE(lease_owner, '?') || ' stopped heartbeating)')),
    lease_token = NULL, lease_expires_at = NULL
WHERE id IN (
    SELECT id FROM backlog_job
    WHERE state = 'running' AND lease_expires_at < ?1 AND lease_expires_at >= ?3
    ORDER BY lease_expires_at
    LIMIT +?2
)
RETURNING queue, state = 'dead' AS dead
"""

QUERIES["sqlite/queue_get.sql"] = """\
-- A queue's stored settings.
-- @param name: &str
SELECT name, paused, max_attempts, backoff_base_ms, backoff_max_ms, lease_ms, ordering,
       retention, concurrency, global_concurrency, group_concurrency, group_on_failure,
       rate_limit, rate_period_ms, group_rate_limit, group_rate_period_ms, shards
FROM backlog_queue WHERE name = ?1
"""

QUERIES["postgres/job_claim_fifo.sql"] = """\
-- Claims up to `limit` due jobs of a queue under one new lease, FIFO: by priority, then due time,
-- then id. SKIP LOCKED: concurrent claimers pass over rows another claimer holds instead of
-- queueing on them.
-- The queue's jobs lie on `shards` claim heads (backlog_queue.shards; 1: one strict head). The
-- claim starts at a random shard and takes each shard's head in turn, in the order above,
-- until it has `limit` jobs: one index probe per shard it visits (the LATERAL subquery), so
-- it costs O(limit + shards) whatever the statistics. The count and the first shard are read
-- once into a MATERIALIZED CTE: inlined, random() would be folded into the probe and run again
-- at each shard. The shards come from a constant series cut to the count (one per possible
-- shard, 256): a series bounded by the count itself made PostgreSQL 15 spend about 10 ms on
-- every claim (against 0.15 ms) once the subquery holds FOR UPDATE.
-- Cursor: each shard's claim starts past `cursor` (three values a shard: priority, run_at,
-- id; src/cursor.rs), past the index entries that claimed and completed jobs leave
-- behind while a held snapshot keeps vacuum from removing them. Empty, or a shard beyond
-- it: from the head (a full pass).
-- @param token: i64
-- @param owner: &str
-- @param expires: i64
-- @param now: i64
-- @param queue: &str
-- @param kinds: Option<Vec<String>>
-- @param limit: i64
-- @param cursor: &[i64]
WITH heads AS MATERIALIZED (
    SELECT n, floor(random() * n)::int AS first
    FROM (SELECT CASE WHEN bool_or(paused OR global_concurrency IS NOT NULL OR rate_limit IS NOT NULL
                                    OR group_rate_limit IS NOT NULL) THEN 0
                       ELSE COALESCE(max(shards), 1) END AS n
          FROM backlog_queue WHERE name = $5) AS q
), picked AS (
    SELECT c.id
    FROM heads AS q
    CROSS JOIN generate_series(0, 255) AS s(i)
    CROSS JOIN LATERAL (
        SELECT id FROM backlog_job
        WHERE queue = $5 AND shard = (q.first + s.i) % q.n AND state = 'available' AND run_at <= $4
          AND (priority, run_at, id) > (COALESCE(($8::bigint[])[3 * ((q.first + s.i) % q.n) + 1], -32768)::smallint,
                                        COALESCE(($8::bigint[])[3 * ((q.first + s.i) % q.n) + 2], -9223372036854775807),
                                        COALESCE(($8::bigint[])[3 * ((q.first + s.i) % q.n) + 3], -9223372036854775807))
          AND ($6::text[] IS NULL OR kind = ANY($6::text[]))
        ORDER BY priority, run_at, id
        LIMIT $7
        FOR UPDATE SKIP LOCKED
    ) AS c
    WHERE s.i < q.n
    LIMIT $7
)
UPDATE backlog_job j
SET state = 'running', attempt = j.attempt + 1, lease_token = $1, lease_owner = $2,
    lease_expires_at = $3, attempted_at = $4
WHERE j.id = ANY(ARRAY(SELECT id FROM picked))
-- Not the queue, token or lease expiry: the claimer chose them.
RETURNING j.id, j.kind, j.payload::text AS payload, j.priority, j.attempt, j.max_attempts,
          j.run_at, j.created_at, j.trace_context, j.group_key, j.shard
"""
QUERIES["postgres/job_claim_lifo.sql"] = """\
-- Claims up to `limit` due jobs of a queue under one new lease, LIFO: by priority, then latest due
-- time first. SKIP LOCKED: concurrent claimers pass over rows another claimer holds instead of
-- queueing on them.
-- Shards: taken as job_claim_fifo takes them, from a random shard, each shard's head in turn.
-- @param token: i64
-- @param owner: &str
-- @param expires: i64
-- @param now: i64
-- @param queue: &str
-- @param kinds: Option<Vec<String>>
-- @param limit: i64
WITH heads AS MATERIALIZED (
    SELECT n, floor(random() * n)::int AS first
    FROM (SELECT CASE WHEN bool_or(paused OR global_concurrency IS NOT NULL OR rate_limit IS NOT NULL
                                    OR group_rate_limit IS NOT NULL) THEN 0
                       ELSE COALESCE(max(shards), 1) END AS n
          FROM backlog_queue WHERE name = $5) AS q
), picked AS (
    SELECT c.id
    FROM heads AS q
    CROSS JOIN generate_series(0, 255) AS s(i)
    CROSS JOIN LATERAL (
        SELECT id FROM backlog_job
        WHERE queue = $5 AND shard = (q.first + s.i) % q.n AND state = 'available' AND run_at <= $4
          AND ($6::text[] IS NULL OR kind = ANY($6::text[]))
        ORDER BY priority, run_at DESC, id DESC
        LIMIT $7
        FOR UPDATE SKIP LOCKED
    ) AS c
    WHERE s.i < q.n
    LIMIT $7
)
UPDATE backlog_job j
SET state = 'running', attempt = j.attempt + 1, lease_token = $1, lease_owner = $2,
    lease_expires_at = $3, attempted_at = $4
WHERE j.id = ANY(ARRAY(SELECT id FROM picked))
-- Not the queue, token or lease expiry: the claimer chose them.
RETURNING j.id, j.kind, j.payload::text AS payload, j.priority, j.attempt, j.max_attempts,
          j.run_at, j.created_at, j.trace_context, j.group_key
"""

QUERIES["postgres/job_complete_delete.sql"] = """\
-- Completes running jobs whose lease tokens still match: deletes them, returning their ids.
-- (id, lease_token) pairs come as two parallel arrays: one statement for any batch size. The
-- primary-key scan of `id = ANY` visits (and so locks) the rows in id order, as every multi-row
-- writer here does, so concurrent completions and claim-token claimers do not deadlock (should a
-- plan ever visit them otherwise, the database reports a deadlock and the completion is retried).
-- Ids are distinct within a call; array_position finds each row's own token.
-- @param ids: &[i64]
-- @param tokens: &[i64]
DELETE FROM backlog_job
WHERE id = ANY($1::bigint[]) AND state = 'running'
  AND lease_token = ($2::bigint[])[array_position($1::bigint[], id)]
RETURNING id
"""

QUERIES["postgres/job_complete_keep.sql"] = """\
-- Completes running jobs whose lease tokens still match: marks them completed, kept, returning
-- their ids. (id, lease_token) pairs come as two parallel arrays (see job_complete_delete for the
-- lock order).
-- Kept means moved: the DELETE … RETURNING and the INSERT move exactly the completed rows into
-- backlog_job_done, atomically, out of the table that claims read and compactions copy
-- (migrations/postgres/0015_job_done.sql), into the partition of their finish time's slot
-- (version 16: a ring the leader empties whole once pruned; the slot, backlog_job_done_slot() written
-- out, is read once a statement: a call of that SQL function would be planned at every statement).
-- @param ids: &[i64]
-- @param tokens: &[i64]
-- @param now: i64
WITH gone AS (
    DELETE FROM backlog_job
    WHERE id = ANY($1::bigint[]) AND state = 'running'
      AND lease_token = ($2::bigint[])[array_position($1::bigint[], id)]
    RETURNING *
)
INSERT INTO backlog_job_done
    (id, queue, kind, payload, state, priority, run_at, attempt, max_attempts, lease_token,
     lease_owner, lease_expires_at, unique_key, errors, result, progress, created_at,
     attempted_at, finished_at, cancel_requested_at, trace_context, group_key, shard,
     slot)
SELECT id, queue, kind, payload, 'completed', priority, run_at, attempt, max_attempts, NULL,
       lease_owner, NULL, unique_key, errors, result, progress, created_at,
       attempted_at, $3, cancel_requested_at, trace_context, group_key, shard,
       (SELECT (($3 / period_us) % 16)::smallint FROM backlog_job_done_ring)
FROM gone
RETURNING id
"""

QUERIES["postgres/job_complete_archive.sql"] = """\
-- Completes running jobs whose lease tokens still match: moves them to the archive, returning their
-- ids. One statement: the CTE deletes the rows and the INSERT moves exactly those, atomically. (id,
-- lease_token) pairs come as two parallel arrays (see job_complete_delete for the lock order).
-- @param ids: &[i64]
-- @param tokens: &[i64]
-- @param now: i64
WITH moved AS (
    DELETE FROM backlog_job
    WHERE id = ANY($1::bigint[]) AND state = 'running'
      AND lease_token = ($2::bigint[])[array_position($1::bigint[], id)]
    RETURNING *
)
INSERT INTO backlog_job_archive
    (id, queue, kind, payload, state, priority, run_at, attempt, max_attempts, lease_token,
     lease_owner, lease_expires_at, unique_key, errors, result, progress, created_at,
     attempted_at, finished_at, cancel_requested_at, trace_context, group_key)
SELECT id, queue, kind, payload, 'completed', priority, run_at, attempt, max_attempts, NULL,
       lease_owner, NULL, unique_key, errors, result, progress, created_at, attempted_at, $3,
       cancel_requested_at, trace_context, group_key
FROM moved
RETURNING id
"""

QUERIES["postgres/job_fail.sql"] = """\
-- Casts: $3 may be NULL, and jsonb_build_object takes "any" so its arguments need a type.
-- @param state: &str
-- @param run_at: i64
-- @param finished_at: Option<i64>
-- @param now: i64
-- @param error: &str
-- @param id: i64
-- @param token: i64
-- A failed job of an ordered group whose queue lets the group go on (group_on_failure 'next')
-- waits for its group's turn again instead of holding its group's place while it waits to retry.
UPDATE backlog_job
SET state = CASE WHEN $1 = 'available' AND group_key IS NOT NULL
                  AND (SELECT q.group_on_failure FROM backlog_queue q WHERE q.name = queue) = 'next'
             THEN 'waiting' ELSE $1 END,
    run_at = $2, finished_at = $3::bigint, lease_token = NULL, lease_expires_at = NULL,
    errors = errors || jsonb_build_array(
        jsonb_build_object('attempt', attempt, 'at', $4::bigint, 'error', $5::text))
WHERE id = $6 AND lease_token = $7 AND state = 'running'
"""

QUERIES["postgres/job_heartbeat.sql"] = """\
-- Also tells the worker whether cancellation of the job was requested.
-- @param expires: i64
-- @param id: i64
-- @param token: i64
UPDATE backlog_job SET lease_expires_at = $1
WHERE id = $2 AND lease_token = $3 AND state = 'running'
RETURNING cancel_requested_at IS NOT NULL AS cancel_requested
"""

QUERIES["postgres/job_release.sql"] = """\
-- Back to available without consuming the attempt the claim counted.
-- @param run_at: i64
-- @param id: i64
-- @param token: i64
UPDATE backlog_job
SET state = 'available', attempt = GREATEST(attempt - 1, 0), run_at = $1,
    lease_token = NULL, lease_expires_at = NULL
WHERE id = $2 AND lease_token = $3 AND state = 'running'
"""

QUERIES["postgres/job_rescue.sql"] = """\
-- Expired leases: back to available, or dead when the attempt that died was the last one.
-- Returns the queue of each job rescued and whether it ended dead (for the per-queue counts).
-- SKIP LOCKED: a row held open by a transaction-mode claimer or another rescuer is passed over;
-- the outer WHERE rechecks state and expiry on the row as it is once locked. = ANY(ARRAY(…)): the
-- batch is locked once (an InitPlan); `id IN (SELECT … LIMIT … FOR UPDATE)` may be rescanned per
-- outer row, each rescan locking more rows than the limit.
-- After: the rescue's floor (src/cursor.rs): only leases that expired since the last complete
-- pass, past the index entries of finished jobs that a held snapshot keeps vacuum from
-- removing; the smallest bigint for a full pass.
-- @param now: i64
-- @param limit: i64
-- @param after: i64
UPDATE backlog_job
SET state = CASE WHEN attempt >= COALESCE(max_attempts,
                     (SELECT q.max_attempts FROM backlog_queue q WHERE q.name = backlog_job.queue), 25)
                 THEN 'dead' ELSE 'available' END,
    finished_at = CASE WHEN attempt >= COALESCE(max_attempts,
                     (SELECT q.max_attempts FROM backlog_queue q WHERE q.name = backlog_job.queue), 25)
                 THEN $1::bigint ELSE NULL END,
    run_at = $1,
    errors = errors || jsonb_build_array(jsonb_build_object('attempt', attempt, 'at', $1::bigint,
             'error', 'lease expired (worker ' || COALESCE(lease_owner, '?') || ' stopped heartbeating)')),
    lease_token = NULL, lease_expires_at = NULL
WHERE id = ANY(ARRAY(
    SELECT id FROM backlog_job
    WHERE state = 'running' AND lease_expires_at < $1 AND lease_expires_at >= $3
    ORDER BY lease_expires_at
    LIMIT $2
    FOR UPDATE SKIP LOCKED
))
AND state = 'running' AND lease_expires_at < $1
RETURNING queue, state = 'dead' AS dead
"""

QUERIES["postgres/queue_get.sql"] = """\
-- @param name: &str
SELECT name, paused, max_attempts, backoff_base_ms, backoff_max_ms, lease_ms, ordering,
       retention, concurrency, global_concurrency, group_concurrency, group_on_failure,
       rate_limit, rate_period_ms, group_rate_limit, group_rate_period_ms, shards
FROM backlog_queue WHERE name = $1
"""

QUERIES["mysql/job_claim_fifo.sql"] = """\
-- SKIP LOCKED: concurrent claimers pass over each other's rows; job_claim_update takes these in
-- the same transaction (no UPDATE … RETURNING in MySQL), so the SELECT returns what it will write.
-- One shard of the queue's claim point per statement (the claimer walks the shards from a random
-- one; see claim_with in mysql.rs). FORCE INDEX: the claim index whatever the statistics say (a
-- scan would lock far more rows). Not the queue, token or lease expiry: the claimer chose them. By
-- priority, then the oldest due first (FIFO).
-- After: the shard's claim cursor (src/cursor.rs), the key `(priority, run_at, id)` past
-- which it starts, past the delete-marked entries a held snapshot keeps purge from
-- removing; NULL: from the head (a full pass). Written out with OR, which the range
-- optimizer reads as ranges of the claim index.
-- @param queue: &str
-- @param shard: i32
-- @param now: i64
-- @param kinds: Option<&str>
-- @param limit: i64
-- @param after_priority: Option<i16>
-- @param after_run_at: Option<i64>
-- @param after_id: Option<i64>
-- @bind queue, shard, now, kinds, kinds, after_priority, after_priority, after_priority, after_run_at, after_run_at, after_id, queue, limit
SELECT id, kind, CAST(payload AS CHAR) AS payload, priority, attempt + 1 AS attempt,
       max_attempts, run_at, created_at, trace_context, group_key
FROM backlog_job FORCE INDEX (backlog_job_shard_claim)
WHERE queue = ? AND state = 'available' AND shard = ? AND run_at <= ?
  AND (? IS NULL OR JSON_CONTAINS(?, JSON_QUOTE(kind)))
  AND (? IS NULL OR priority > ? OR (priority = ? AND (run_at > ? OR (run_at = ? AND id > ?))))
  AND NOT EXISTS (SELECT 1 FROM backlog_queue WHERE name = ? AND (paused OR global_concurrency IS NOT NULL
                                                                  OR rate_limit IS NOT NULL OR group_rate_limit IS NOT NULL))
ORDER BY priority, run_at, id
LIMIT ?
FOR UPDATE SKIP LOCKED
"""
QUERIES["mysql/job_claim_lifo.sql"] = """\
-- SKIP LOCKED: concurrent claimers pass over each other's rows; job_claim_update takes these in
-- the same transaction (no UPDATE … RETURNING in MySQL), so the SELECT returns what it will write.
-- One shard of the queue's claim point per statement (the claimer walks the shards from a random
-- one; see claim_with in mysql.rs). FORCE INDEX: the claim index whatever the statistics say (a
-- scan would lock far more rows). Not the queue, token or lease expiry: the claimer chose them. By
-- priority, then the newest due first (LIFO).
-- @param queue: &str
-- @param shard: i32
-- @param now: i64
-- @param kinds: Option<&str>
-- @param limit: i64
-- @bind queue, shard, now, kinds, kinds, queue, limit
SELECT id, kind, CAST(payload AS CHAR) AS payload, priority, attempt + 1 AS attempt,
       max_attempts, run_at, created_at, trace_context, group_key
FROM backlog_job FORCE INDEX (backlog_job_shard_claim)
WHERE queue = ? AND state = 'available' AND shard = ? AND run_at <= ?
  AND (? IS NULL OR JSON_CONTAINS(?, JSON_QUOTE(kind)))
  AND NOT EXISTS (SELECT 1 FROM backlog_queue WHERE name = ? AND (paused OR global_concurrency IS NOT NULL
                                                                  OR rate_limit IS NOT NULL OR group_rate_limit IS NOT NULL))
ORDER BY priority, run_at DESC, id DESC
LIMIT ?
FOR UPDATE SKIP LOCKED
"""

QUERIES["mysql/job_claim_update.sql"] = """\
-- The rows job_claim locked in this transaction. FORCE INDEX: on a small table the
-- optimizer scans instead, waiting on rows other workers hold.
-- @param token: i64
-- @param owner: &str
-- @param expires: i64
-- @param now: i64
-- @list IDS ids: i64
UPDATE backlog_job FORCE INDEX (PRIMARY)
SET state = 'running', attempt = attempt + 1, lease_token = ?, lease_owner = ?,
    lease_expires_at = ?, attempted_at = ?
WHERE id IN (/*IDS*/)
"""

QUERIES["mysql/job_complete_delete_fenced.sql"] = """\
-- The common case in one statement: the jobs of one lease token (a claim gives its whole batch
-- one token), fenced by it. FORCE INDEX (PRIMARY): rows are found and locked in id order, never
-- by a scan. Multi-table syntax because single-table DELETE takes no index hint.
-- @list IDS ids: i64
-- @param token: i64
DELETE backlog_job FROM backlog_job FORCE INDEX (PRIMARY)
WHERE id IN (/*IDS*/) AND lease_token = ? AND state = 'running'
"""

QUERIES["mysql/job_complete_lock.sql"] = """\
-- No RETURNING in MySQL: lock the rows first to learn which hold the caller's token. FORCE INDEX:
-- on a small table the optimizer scans instead, locking rows other workers hold (deadlocks).
-- @list IDS ids: i64
SELECT id, lease_token, state FROM backlog_job FORCE INDEX (PRIMARY) WHERE id IN (/*IDS*/) FOR UPDATE
"""

QUERIES["mysql/job_complete_archive.sql"] = """\
-- Rows job_complete_lock found running with the caller's token (FORCE INDEX: see there); they
-- are deleted afterwards.
-- @param now: i64
-- @list IDS ids: i64
INSERT INTO backlog_job_archive
    (id, queue, kind, payload, state, priority, run_at, attempt, max_attempts, lease_token,
     lease_owner, lease_expires_at, unique_key, errors, result, progress, created_at,
     attempted_at, finished_at, cancel_requested_at, trace_context, group_key)
SELECT id, queue, kind, payload, 'completed', priority, run_at, attempt, max_attempts, NULL,
       lease_owner, NULL, unique_key, errors, result, progress, created_at, attempted_at, ?,
       cancel_requested_at, trace_context, group_key
FROM backlog_job FORCE INDEX (PRIMARY)
WHERE id IN (/*IDS*/)
"""

QUERIES["mysql/job_complete_keep.sql"] = """\
-- Rows job_complete_lock found running with the caller's token (still locked; FORCE INDEX: see
-- there), kept: copied, completed, into the ring table completions write now (the view
-- backlog_job_done_current, turned by the leader; migrations/mysql/0017_job_done_ring.sql);
-- job_complete_delete removes them from the job table after, in the same transaction.
-- @param now: i64
-- @list IDS ids: i64
INSERT INTO backlog_job_done_current
    (id, queue, kind, payload, state, priority, run_at, attempt, max_attempts, lease_token,
     lease_owner, lease_expires_at, unique_key, errors, result, progress, created_at,
     attempted_at, finished_at, cancel_requested_at, trace_context, group_key, shard)
SELECT id, queue, kind, payload, 'completed', priority, run_at, attempt, max_attempts, NULL,
       lease_owner, NULL, unique_key, errors, result, progress, created_at, attempted_at, ?,
       cancel_requested_at, trace_context, group_key, shard
FROM backlog_job FORCE INDEX (PRIMARY)
WHERE id IN (/*IDS*/)
"""

QUERIES["mysql/job_complete_delete.sql"] = """\
-- Rows job_complete_lock found running with the caller's token (still locked). Multi-table
-- syntax because single-table DELETE takes no index hint (see job_complete_lock for why).
-- @list IDS ids: i64
DELETE backlog_job FROM backlog_job FORCE INDEX (PRIMARY) WHERE id IN (/*IDS*/)
"""

QUERIES["mysql/job_fail.sql"] = """\
-- errors first: MySQL evaluates SET left to right with the values already assigned.
-- @param state: &str
-- @param run_at: i64
-- @param finished_at: Option<i64>
-- @param now: i64
-- @param error: &str
-- @param id: i64
-- @param token: i64
-- @bind now, error, state, state, run_at, finished_at, id, token
-- A failed job of an ordered group whose queue lets the group go on (group_on_failure 'next')
-- waits for its group's turn again instead of holding its group's place while it waits to retry.
UPDATE backlog_job
SET errors = JSON_ARRAY_APPEND(errors, '$', JSON_OBJECT('attempt', attempt, 'at', ?, 'error', ?)),
    state = CASE WHEN ? = 'available' AND group_key IS NOT NULL
                  AND (SELECT q.group_on_failure FROM backlog_queue q WHERE q.name = queue) = 'next'
             THEN 'waiting' ELSE ? END,
    run_at = ?, finished_at = ?, lease_token = NULL, lease_expires_at = NULL
WHERE id = ? AND lease_token = ? AND state = 'running'
"""

QUERIES["mysql/job_heartbeat.sql"] = """\
-- No RETURNING in MySQL: job_heartbeat_cancel reads the cancel flag after this.
-- @param expires: i64
-- @param id: i64
-- @param token: i64
UPDATE backlog_job SET lease_expires_at = ?
WHERE id = ? AND lease_token = ? AND state = 'running'
"""

QUERIES["mysql/job_heartbeat_cancel.sql"] = """\
-- Whether cancellation of the job was requested, read after job_heartbeat (fenced again: no row
-- means the lease was lost in between).
-- @param id: i64
-- @param token: i64
SELECT cancel_requested_at IS NOT NULL AS cancel_requested
FROM backlog_job WHERE id = ? AND lease_token = ? AND state = 'running'
"""

QUERIES["mysql/job_release.sql"] = """\
-- Back to available without consuming the attempt the claim counted.
-- @param run_at: i64
-- @param id: i64
-- @param token: i64
UPDATE backlog_job
SET state = 'available', attempt = GREATEST(attempt - 1, 0), run_at = ?,
    lease_token = NULL, lease_expires_at = NULL
WHERE id = ? AND lease_token = ? AND state = 'running'
"""

QUERIES["mysql/job_rescue_ids.sql"] = """\
-- Expired leases, oldest first, locked for job_rescue in the same transaction. SKIP LOCKED: a row
-- held open by a transaction-mode claimer (or another rescuer) is passed over instead of waited
-- on; a plain UPDATE … ORDER BY … LIMIT scanned into it and stalled every claimer's rescue.
-- After: the rescue's floor (src/cursor.rs): only leases that expired since the last complete
-- pass, past the delete-marked entries of finished jobs that a held snapshot keeps purge from
-- removing; the smallest BIGINT for a full pass.
-- Two steps in one statement, as in job_claim_fifo: the derived table reads the lease index
-- without locking (a locking read there checks every delete-marked entry for an implicit
-- lock), then the rows are locked by primary key in expiry order and rechecked; STRAIGHT_JOIN
-- and the order by `c`'s column stop the locking at the LIMIT.
-- @param now: i64
-- @param after: i64
-- @param limit: i64
-- @bind now, after, limit, now, limit
SELECT j.id FROM (
    SELECT lease_expires_at, id FROM backlog_job FORCE INDEX (backlog_job_lease)
    WHERE state = 'running' AND lease_expires_at < ? AND lease_expires_at >= ?
    ORDER BY lease_expires_at
    LIMIT ?
) AS c
STRAIGHT_JOIN backlog_job AS j FORCE INDEX (PRIMARY) ON j.id = c.id
WHERE j.state = 'running' AND j.lease_expires_at < ?
ORDER BY c.lease_expires_at
LIMIT ?
FOR UPDATE SKIP LOCKED
"""

QUERIES["mysql/job_rescue.sql"] = """\
-- Expired leases that job_rescue_ids locked: back to available, or dead when the
-- attempt that died was the last one. errors first (SET runs left to right); the CASE is repeated
-- rather than reading the new state, which MariaDB's SIMULTANEOUS_ASSIGNMENT mode would not see.
-- The WHERE rechecks state and expiry on the locked rows.
-- @param now: i64
-- @list IDS ids: i64
-- @bind now, now, now, ids, now
UPDATE backlog_job FORCE INDEX (PRIMARY)
SET errors = JSON_ARRAY_APPEND(errors, '$', JSON_OBJECT('attempt', attempt, 'at', ?,
             'error', CONCAT('lease expired (worker ', COALESCE(lease_owner, '?'),
                             ' stopped heartbeating)'))),
    state = CASE WHEN attempt >= COALESCE(max_attempts,
                     (SELECT q.max_attempts FROM backlog_queue q WHERE q.name = backlog_job.queue), 25)
                 THEN 'dead' ELSE 'available' END,
    finished_at = CASE WHEN attempt >= COALESCE(max_attempts,
                     (SELECT q.max_attempts FROM backlog_queue q WHERE q.name = backlog_job.queue), 25)
                 THEN ? ELSE NULL END,
    run_at = ?, lease_token = NULL, lease_expires_at = NULL
WHERE id IN (/*IDS*/) AND state = 'running' AND lease_expires_at < ?
"""

QUERIES["mysql/queue_get.sql"] = """\
-- @param name: &str
SELECT name, paused, max_attempts, backoff_base_ms, backoff_max_ms, lease_ms, ordering,
       retention, concurrency, global_concurrency, group_concurrency, group_on_failure,
       rate_limit, rate_period_ms, group_rate_limit, group_rate_period_ms, shards
FROM backlog_queue WHERE name = ?
"""

QUERIES["mysql/queue_shards.sql"] = """\
-- How many shards a queue's claim point has (1 when the queue has no settings row): where
-- inserts put its jobs and which heads a claim walks.
-- @param queue: &str
SELECT COALESCE(MAX(shards), 1) FROM backlog_queue WHERE name = ?
"""


if __name__ == "__main__":
    sys.exit(_main(sys.argv[1:]))
