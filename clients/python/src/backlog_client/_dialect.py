"""What differs between the databases: connecting, placeholders, and the statements each
operation of the contract takes. The statements are the catalog's (QUERIES); before one is sent,
its list marker is filled in (`/*IDS*/` with one placeholder per id, as each file's `-- @list`
line declares) and, for the drivers whose placeholders differ from the file's, the placeholders
are rewritten: see `_placeholders`. Nothing else is ever formatted into SQL."""

from __future__ import annotations

import contextlib
import json
import random
import re
import sqlite3
import urllib.parse
from typing import Any, Callable, Iterator, Optional, Sequence

from ._job import Job
from ._queries import QUERIES

#: The orderings a queue can have; the claim has a file for each.
ORDERINGS = ("fifo", "lifo")
#: A claim cursor's key: (priority, run_at, id).
Key = tuple[int, int, int]


def _placeholders(text: str, pattern: str, replace: Callable[[re.Match[str]], str]) -> str:
    """Rewrites the placeholders `pattern` matches into the driver's own and doubles every `%`
    (psycopg and PyMySQL treat `%` as their own marker everywhere). String literals and `--`
    comments keep their text: MySQL's rescue contains the literal '?' and some comments mention
    placeholders."""
    out: list[str] = []
    i, rx = 0, re.compile(pattern)
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


_PATTERNS = {"sqlite": None, "postgres": (r"\$(\d+)", "%(p{})s"), "mysql": (r"\?", "%s")}
#: A list's placeholder in the driver's own marks (PostgreSQL's files take arrays, not lists).
_LIST_MARK = {"sqlite": "?", "mysql": "%s"}
_TEXTS: dict[tuple[str, str], str] = {}
_STATEMENTS: dict[tuple[str, str, int, int, int], str] = {}
#: Most statements with their lists filled in kept at once (a batch's size is one of many).
_KEPT = 512


def statement(flavor: str, file: str, ids: int = 0, rows: int = 0, width: int = 0) -> str:
    """The catalog's statement `flavor/file.sql`, in the driver's placeholders, its lists filled
    in: `/*IDS*/` with `ids` placeholders, `/*ROWS*/` with `rows` rows of `width` (as each file's
    `-- @list` or `-- @rows` line declares). sqlite3 binds the files' numbered `?N` from a
    sequence as they are; for psycopg the files' `$N` become `%(pN)s` (a number used twice is one
    parameter, as in the file); for PyMySQL the positional `?` become `%s`."""
    key = (flavor, file, ids, rows, width)
    text = _STATEMENTS.get(key)
    if text is not None:
        return text
    base = _TEXTS.get((flavor, file))
    if base is None:
        base = QUERIES[f"{flavor}/{file}.sql"]
        pattern = _PATTERNS[flavor]
        if pattern is not None:
            rx, mark = pattern
            base = _placeholders(base, rx, lambda m: mark.format(m.group(1) if m.groups() else ""))
        _TEXTS[(flavor, file)] = base
    text = base
    if ids or rows:
        # The lists hold nothing but placeholders: filled in after the rewrite, in the
        # driver's marks, so a statement of a thousand rows is not scanned character by character.
        mark = _LIST_MARK[flavor]
        text = text.replace("/*IDS*/", ", ".join([mark] * ids))
        one = "(" + ", ".join([mark] * width) + ")"
        text = text.replace("/*ROWS*/", ", ".join([one] * rows))
    if len(_STATEMENTS) < _KEPT:
        _STATEMENTS[key] = text
    return text


def pg_params(*values: Any) -> dict[str, Any]:
    """Positional values as the `pN` a translated PostgreSQL statement names."""
    return {f"p{i}": v for i, v in enumerate(values, start=1)}


class _Dialect:
    """What differs between the databases: connecting, transactions, and the statements an
    operation takes. Every method takes the connection to run on."""

    name: str

    def sql(self, name: str, order: Optional[str] = None, ids: int = 0) -> str:
        """The statement `name` of this dialect (`name_ORDER` when an ordering is given), its
        list filled in, in the driver's placeholders."""
        if order is not None and order not in ORDERINGS:
            raise ValueError(f"unknown ordering {order!r}")
        return statement(self.name, name if order is None else f"{name}_{order}", ids)

    def transient(self, err: Exception) -> bool:
        """Whether `err` rolled back a transaction that can simply run again (a deadlock)."""
        return False

    def connect(self) -> Any:
        raise NotImplementedError

    def transaction(self, conn: Any) -> Any:
        """A context manager: one transaction on `conn`."""
        raise NotImplementedError

    def schema_missing(self, err: Exception) -> bool:
        """Whether `err` says that the table a statement reads does not exist."""
        raise NotImplementedError

    def claim(self, conn: Any, queue: str, token: int, owner: str, expires: int, now: int,
              kinds: Optional[Sequence[str]], limit: int, order: str,
              after: dict[int, Key]) -> tuple[list[Any], list[tuple[int, Key]]]:
        raise NotImplementedError

    def complete(self, conn: Any, retention: str, job: Job, now: int) -> bool:
        return job.id in self.complete_many(conn, retention, [job], now)

    def complete_many(self, conn: Any, retention: str, jobs: Sequence[Job],
                      now: int) -> set[int]:
        """Completes jobs whose leases (id and token) still hold, in one statement (or one
        transaction): the ids completed."""
        raise NotImplementedError

    def complete_claim(self, conn: Any, retention: str, done: Sequence[Job], done_now: int,
                       queue: str, token: int, owner: str, expires: int, now: int,
                       kinds: Optional[Sequence[str]], limit: int, order: str,
                       after: dict[int, Key]
                       ) -> Optional[tuple[set[int], list[Any], list[tuple[int, Key]]]]:
        """Completes `done` and claims the next jobs in one statement, where the dialect has one
        for this retention: (ids completed, the claim's rows and cursors), else None."""
        return None

    def fail(self, conn: Any, job: Job, state: str, run_at: int, finished_at: Optional[int],
             now: int, error: str) -> bool:
        raise NotImplementedError

    def heartbeat(self, conn: Any, job: Job, expires: int) -> tuple[bool, bool]:
        raise NotImplementedError

    def release(self, conn: Any, job: Job, run_at: int) -> bool:
        raise NotImplementedError

    def rescue(self, conn: Any, now: int, limit: int, after: int) -> int:
        raise NotImplementedError

    def queue_row(self, conn: Any, queue: str) -> Any:
        raise NotImplementedError


class _Sqlite(_Dialect):
    name = "sqlite"

    def __init__(self, path: str) -> None:
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

    def schema_missing(self, err: Exception) -> bool:
        return isinstance(err, sqlite3.OperationalError) and "no such table" in str(err)

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

    def claim(self, conn: Any, queue: str, token: int, owner: str, expires: int, now: int,
              kinds: Optional[Sequence[str]], limit: int, order: str,
              after: dict[int, Key]) -> tuple[list[Any], list[tuple[int, Key]]]:
        # One writer, which rewrites rows in place: nothing piles up before the head, no cursor.
        kinds_json = None if kinds is None else json.dumps(list(kinds))
        params = (token, owner, expires, now, queue, kinds_json, limit)
        return conn.execute(self.sql("job_claim", order), params).fetchall(), []

    def complete_many(self, conn: Any, retention: str, jobs: Sequence[Job],
                      now: int) -> set[int]:
        pairs = json.dumps([[job.id, job.token] for job in jobs])
        if retention == "delete":
            rows = conn.execute(self.sql("job_complete_delete"), (pairs,)).fetchall()
        elif retention == "keep":
            rows = conn.execute(self.sql("job_complete_keep"), (pairs, now)).fetchall()
        else:  # archive: copy, then delete, in one transaction
            with self.transaction(conn):
                conn.execute(self.sql("job_complete_archive"), (pairs, now))
                rows = conn.execute(self.sql("job_complete_delete"), (pairs,)).fetchall()
        return {int(r[0]) for r in rows}

    def fail(self, conn: Any, job: Job, state: str, run_at: int, finished_at: Optional[int],
             now: int, error: str) -> bool:
        params = (state, run_at, finished_at, now, error, job.id, job.token)
        return bool(conn.execute(self.sql("job_fail"), params).rowcount == 1)

    def heartbeat(self, conn: Any, job: Job, expires: int) -> tuple[bool, bool]:
        rows = conn.execute(self.sql("job_heartbeat"), (expires, job.id, job.token)).fetchall()
        return (True, bool(rows[0][0])) if rows else (False, False)

    def release(self, conn: Any, job: Job, run_at: int) -> bool:
        cur = conn.execute(self.sql("job_release"), (run_at, job.id, job.token))
        return bool(cur.rowcount == 1)

    def rescue(self, conn: Any, now: int, limit: int, after: int) -> int:
        return len(conn.execute(self.sql("job_rescue"), (now, limit, after)).fetchall())

    def queue_row(self, conn: Any, queue: str) -> Any:
        return conn.execute(self.sql("queue_get"), (queue,)).fetchone()


class _Postgres(_Dialect):
    name = "postgres"

    def __init__(self, url: str) -> None:
        import psycopg

        self.url, self.psycopg = url, psycopg

    def connect(self) -> Any:
        # Nothing to set (docs/sql.md "Session settings"); backlog.notify is left on so that this
        # process's inserts wake the workers through the trigger.
        return self.psycopg.connect(self.url, autocommit=True)

    def transaction(self, conn: Any) -> Any:
        return conn.transaction()

    def schema_missing(self, err: Exception) -> bool:
        return isinstance(err, self.psycopg.errors.UndefinedTable)

    def transient(self, err: Exception) -> bool:
        # LockNotAvailable: the combined completion and claim gives up a lock wait after 50 ms
        # (lock_timeout, job_complete_then_claim_*.sql), its transaction rolled back whole.
        errors = self.psycopg.errors
        return isinstance(err, (errors.DeadlockDetected, errors.SerializationFailure,
                                errors.LockNotAvailable))

    def _run(self, conn: Any, name: str, *values: Any, order: Optional[str] = None) -> Any:
        return conn.execute(self.sql(name, order), pg_params(*values))

    def claim(self, conn: Any, queue: str, token: int, owner: str, expires: int, now: int,
              kinds: Optional[Sequence[str]], limit: int, order: str,
              after: dict[int, Key]) -> tuple[list[Any], list[tuple[int, Key]]]:
        kinds_list = None if kinds is None else list(kinds)
        if order != "fifo":
            cur = self._run(conn, "job_claim", token, owner, expires, now, queue, kinds_list,
                            limit, order=order)
            return cur.fetchall(), []
        rows = self._run(conn, "job_claim", token, owner, expires, now, queue, kinds_list,
                         limit, self._cursor(after), order=order).fetchall()
        return rows, [(r[10], (r[3], r[6], r[0])) for r in rows]

    @staticmethod
    def _cursor(after: dict[int, Key]) -> list[int]:
        # The cursors as the claims take them: three values a shard from shard 0, the smallest
        # key where a shard has none; empty for a full pass.
        flat: list[int] = []
        for shard in range(max(after, default=-1) + 1):
            flat += after.get(shard, (-32768, -2**63, -2**63))
        return flat

    def complete_claim(self, conn: Any, retention: str, done: Sequence[Job], done_now: int,
                       queue: str, token: int, owner: str, expires: int, now: int,
                       kinds: Optional[Sequence[str]], limit: int, order: str,
                       after: dict[int, Key]
                       ) -> Optional[tuple[set[int], list[Any], list[tuple[int, Key]]]]:
        if retention not in ("keep", "delete"):
            return None  # archive: no combined statement
        ordered = sorted(done, key=lambda j: j.id)
        values: list[Any] = [token, owner, expires, now, queue,
                             None if kinds is None else list(kinds), limit,
                             [j.id for j in ordered], [j.token for j in ordered]]
        if retention == "keep":
            values.append(done_now)
        if order == "fifo":
            values.append(self._cursor(after))
        rows = self._run(conn, f"job_complete_then_claim_{retention}", *values,
                         order=order).fetchall()
        # A row per claimed job (done_ids NULL), then one whose done_ids are the completed ids.
        completed: set[int] = set()
        claimed = []
        for r in rows:
            if r[1] is None:
                completed = {int(i) for i in r[0] or ()}
            else:
                claimed.append(r[1:])
        reached = [(r[10], (r[3], r[6], r[0])) for r in claimed] if order == "fifo" else []
        return completed, claimed, reached

    def complete_many(self, conn: Any, retention: str, jobs: Sequence[Job],
                      now: int) -> set[int]:
        name = {"delete": "job_complete_delete", "keep": "job_complete_keep",
                "archive": "job_complete_archive"}[retention]
        # In id order: the order the statement locks rows in (see job_complete_delete.sql).
        ordered = sorted(jobs, key=lambda j: j.id)
        ids, tokens = [j.id for j in ordered], [j.token for j in ordered]
        if retention == "delete":
            cur = self._run(conn, name, ids, tokens)
        else:
            cur = self._run(conn, name, ids, tokens, now)
        return {int(r[0]) for r in cur.fetchall()}

    def fail(self, conn: Any, job: Job, state: str, run_at: int, finished_at: Optional[int],
             now: int, error: str) -> bool:
        cur = self._run(conn, "job_fail", state, run_at, finished_at, now, error, job.id,
                        job.token)
        return bool(cur.rowcount == 1)

    def heartbeat(self, conn: Any, job: Job, expires: int) -> tuple[bool, bool]:
        rows = self._run(conn, "job_heartbeat", expires, job.id, job.token).fetchall()
        return (True, bool(rows[0][0])) if rows else (False, False)

    def release(self, conn: Any, job: Job, run_at: int) -> bool:
        return bool(self._run(conn, "job_release", run_at, job.id, job.token).rowcount == 1)

    def rescue(self, conn: Any, now: int, limit: int, after: int) -> int:
        return len(self._run(conn, "job_rescue", now, limit, after).fetchall())

    def queue_row(self, conn: Any, queue: str) -> Any:
        return self._run(conn, "queue_get", queue).fetchone()


class _MySql(_Dialect):
    name = "mysql"

    def __init__(self, url: str) -> None:
        import pymysql  # type: ignore[import]  # no type hints

        self.pymysql = pymysql
        u = urllib.parse.urlsplit(url)
        self.args = {
            "host": u.hostname or "127.0.0.1",
            "port": u.port or 3306,
            "user": urllib.parse.unquote(u.username or "root"),
            "password": urllib.parse.unquote(u.password or ""),
            "database": urllib.parse.unquote(u.path.lstrip("/")),
        }

    def connect(self) -> Any:
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
    def transaction(self, conn: Any) -> Iterator[None]:
        conn.begin()
        try:
            yield
        except BaseException:
            conn.rollback()
            raise
        conn.commit()

    def schema_missing(self, err: Exception) -> bool:
        # 1146: table doesn't exist.
        return isinstance(err, self.pymysql.err.ProgrammingError) and err.args[0] == 1146

    def transient(self, err: Exception) -> bool:
        # 1213 deadlock (InnoDB rolled the transaction back), 1205 lock wait timeout.
        return isinstance(err, self.pymysql.err.OperationalError) and err.args[0] in (1213, 1205)

    def _run(self, conn: Any, name: str, params: Sequence[Any], order: Optional[str] = None,
             ids: int = 0) -> Any:
        cur = conn.cursor()
        cur.execute(self.sql(name, order, ids), params)
        return cur

    def claim(self, conn: Any, queue: str, token: int, owner: str, expires: int, now: int,
              kinds: Optional[Sequence[str]], limit: int, order: str,
              after: dict[int, Key]) -> tuple[list[Any], list[tuple[int, Key]]]:
        # No UPDATE … RETURNING: lock the rows with SKIP LOCKED, then mark them, in one
        # transaction. The SELECT already shows the attempt the UPDATE writes.
        kinds_json = None if kinds is None else json.dumps(list(kinds))
        reached: list[tuple[int, Key]] = []
        with self.transaction(conn):
            # The queue's claim point lies on `shards` heads: from a random one, each in turn.
            n = self._run(conn, "queue_shards", (queue,)).fetchone()[0]
            first, rows = random.randrange(n), list[Any]()
            for k in range(n):
                shard = (first + k) % n
                if order == "fifo":
                    p, r, i = after.get(shard, (None, None, None))
                    params: tuple[Any, ...] = (queue, shard, now, kinds_json, kinds_json, p, p, p,
                                               r, r, i, queue, limit - len(rows))
                else:
                    params = (queue, shard, now, kinds_json, kinds_json, queue, limit - len(rows))
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

    def complete_many(self, conn: Any, retention: str, jobs: Sequence[Job],
                      now: int) -> set[int]:
        if retention == "delete" and len(jobs) == 1:
            job = jobs[0]
            cur = self._run(conn, "job_complete_delete_fenced", (job.id, job.token), ids=1)
            return {job.id} if cur.rowcount == 1 else set()
        # Lock the rows (in id order), keep those still ours, copy them where they are kept
        # (keep: the completed jobs' ring, through the view backlog_job_done_current, schema
        # version 17; archive: backlog_job_archive), delete them.
        tokens = {j.id: j.token for j in jobs}
        ids = sorted(tokens)
        with self.transaction(conn):
            rows = self._run(conn, "job_complete_lock", ids, ids=len(ids)).fetchall()
            held = sorted(int(r[0]) for r in rows
                          if r[1] == tokens.get(int(r[0])) and r[2] == "running")
            if not held:
                return set()
            if retention != "delete":
                copy = {"keep": "job_complete_keep", "archive": "job_complete_archive"}[retention]
                self._run(conn, copy, (now, *held), ids=len(held))
            self._run(conn, "job_complete_delete", held, ids=len(held))
        return set(held)

    def fail(self, conn: Any, job: Job, state: str, run_at: int, finished_at: Optional[int],
             now: int, error: str) -> bool:
        params = (now, error, state, state, run_at, finished_at, job.id, job.token)
        return bool(self._run(conn, "job_fail", params).rowcount == 1)

    def heartbeat(self, conn: Any, job: Job, expires: int) -> tuple[bool, bool]:
        # No RETURNING: the fenced UPDATE (matched rows, thanks to FOUND_ROWS), then the flag,
        # fenced again.
        if self._run(conn, "job_heartbeat", (expires, job.id, job.token)).rowcount != 1:
            return False, False
        row = self._run(conn, "job_heartbeat_cancel", (job.id, job.token)).fetchone()
        return (True, bool(row[0])) if row else (False, False)

    def release(self, conn: Any, job: Job, run_at: int) -> bool:
        return bool(self._run(conn, "job_release", (run_at, job.id, job.token)).rowcount == 1)

    def rescue(self, conn: Any, now: int, limit: int, after: int) -> int:
        # Lock a batch of expired leases, SKIP LOCKED, then update those rows by id.
        with self.transaction(conn):
            ids = [r[0] for r in self._run(conn, "job_rescue_ids",
                                            (now, after, limit, now, limit)).fetchall()]
            if not ids:
                return 0
            cur = self._run(conn, "job_rescue", (now, now, now, *ids, now), ids=len(ids))
            return int(cur.rowcount)

    def queue_row(self, conn: Any, queue: str) -> Any:
        return self._run(conn, "queue_get", (queue,)).fetchone()


def dialect_for(url: str) -> _Dialect:
    """The dialect of a URL: `sqlite://PATH`, `postgres://…` or `mysql://…`."""
    if url.startswith("sqlite://"):
        return _Sqlite(url[len("sqlite://"):].split("?", 1)[0])
    if url.startswith(("postgres://", "postgresql://")):
        return _Postgres(url)
    if url.startswith(("mysql://", "mariadb://")):
        return _MySql(url)
    raise ValueError(f"expected sqlite://PATH, postgres://… or mysql://…, not {url!r}")



def flavor_of(conn: Any) -> str:
    """Which database a DB-API connection the caller owns talks to, by its driver: `sqlite`
    (sqlite3), `postgres` (psycopg 3) or `mysql` (PyMySQL)."""
    if isinstance(conn, sqlite3.Connection):
        return "sqlite"
    module = type(conn).__module__
    if module == "psycopg" or module.startswith("psycopg."):
        return "postgres"
    if module == "pymysql" or module.startswith("pymysql."):
        return "mysql"
    raise TypeError(
        f"expected a connection of sqlite3, psycopg (3) or PyMySQL, not {type(conn).__module__}."
        f"{type(conn).__qualname__}"
    )
