"""The producer of the SQL contract (docs/sql.md, "Enqueue from any language"): the catalog's
multi-row INSERTs on a DB-API connection the caller owns, inside whatever transaction the caller
has open, never committing, so a job exists exactly when the caller's own rows commit.

A batch goes in as one statement per 1,000 jobs, as backlog's own producer sends it
(crates/backlog-sql/src/batch.rs): `job_insert_uniform` when the jobs differ in their payload
alone (their shared values bound once), `job_insert_plain` for other jobs without a unique key,
`job_insert` for a chunk with unique keys (on MySQL, which has no RETURNING, with a marker that
`job_insert_created` reads the new rows by and `job_insert_unmark` clears)."""

from __future__ import annotations

import contextlib
import json
import random
import time
import weakref
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Iterator, Mapping, Optional, Sequence

from . import _validate as check
from ._dialect import flavor_of, pg_params, statement
from ._job import new_token
from .errors import InvalidOption

#: The options of one job, besides its queue and payload.
OPTIONS = ("priority", "run_at", "delay", "max_attempts", "unique_key", "kind", "group",
           "trace_context")
_KEYS = frozenset(("queue", "payload", *OPTIONS))
#: Most jobs one INSERT statement writes (SQLite binds at most 32,766 values; 11 a row at most).
INSERT_CHUNK = 1000


@dataclass
class _Row:
    """One job, checked. `delay_us` is added to the database's now into its `run_at`."""

    queue: str
    payload: str
    kind: Optional[str] = None
    priority: int = 0
    run_at: Optional[int] = None
    delay_us: Optional[int] = None
    max_attempts: Optional[int] = None
    unique_key: Optional[str] = None
    group: Optional[str] = None
    trace: Optional[str] = None

    def due(self, now: int) -> int:
        """When it may run: its run_at, else now plus its delay, else now."""
        if self.run_at is not None:
            return self.run_at
        return now if self.delay_us is None else now + self.delay_us

    def values(self, now: int) -> tuple[Any, ...]:
        """The values of its row of job_insert_plain / job_insert, up to trace_context."""
        return (self.queue, self.kind, self.payload, self.priority, self.due(now),
                self.max_attempts, self.trace)


def row(queue: str, payload: Any, *, priority: Optional[int] = None,
        run_at: Optional[check.Instant] = None, delay: Optional[check.Delay] = None,
        max_attempts: Optional[int] = None, unique_key: Optional[str] = None,
        kind: Optional[str] = None, group: Optional[str] = None,
        trace_context: Optional[check.TraceContext] = None) -> _Row:
    """Checks one job's values (raising a BacklogError before anything is written)."""
    job = _Row(check.name("queue name", queue), check.payload(payload))
    if kind is not None:
        job.kind = check.name("kind", kind)
    if priority is not None:
        job.priority = check.priority(priority)
    if run_at is not None and delay is not None:
        raise InvalidOption("give run_at or delay, not both")
    if run_at is not None:
        job.run_at = check.instant_us(run_at)
    if delay is not None:
        job.delay_us = check.delay_us(delay)
    if max_attempts is not None:
        job.max_attempts = check.max_attempts(max_attempts)
    if unique_key is not None:
        job.unique_key = check.key("unique key", unique_key)
    if trace_context is not None:
        job.trace = check.trace_context(trace_context)
    if group is not None:
        # A grouped job waits for its group's turn: made `waiting` in the inserting transaction
        # (job_group_set), never claimable before (docs/sql.md "Ordered groups").
        job.group = check.key("group key", group)
    return job


def rows(jobs: Iterable[Mapping[str, Any]]) -> list[_Row]:
    """Checks every job of a batch before any is written: each a mapping with `queue`,
    `payload` and any of OPTIONS."""
    out = []
    for i, job in enumerate(jobs):
        if not isinstance(job, dict) and not isinstance(job, Mapping):
            raise InvalidOption(f"job {i}: expected a mapping with queue and payload, not {job!r}")
        unknown = job.keys() - _KEYS
        if unknown:
            raise InvalidOption(f"job {i}: unknown options {sorted(unknown)}")
        if "queue" not in job or "payload" not in job:
            raise InvalidOption(f"job {i}: queue and payload are required")
        out.append(row(**job))
    return out


def one_statement(jobs: Sequence[_Row], flavor: str) -> bool:
    """Whether the batch goes in as one statement, atomic on its own: no unique key (which may
    need a look-up), no group (made waiting after the insert), one chunk, and on MySQL one job
    (a batch there may need its marker statements)."""
    if flavor == "mysql" and len(jobs) > 1:
        return False
    return len(jobs) <= INSERT_CHUNK and all(
        j.unique_key is None and j.group is None for j in jobs)


def _execute(conn: Any, sql: str, params: Sequence[Any] | Mapping[str, Any]) -> Any:
    cur = conn.cursor()
    cur.execute(sql, params)
    return cur


def _one(conn: Any, sql: str, params: Sequence[Any] | Mapping[str, Any]) -> Any:
    cur = _execute(conn, sql, params)
    try:
        return cur.fetchone()
    finally:
        cur.close()


def db_now_us(conn: Any, flavor: str) -> int:
    """The database's clock, as the "now" column defaults read it (db_now.sql)."""
    return int(_one(conn, statement(flavor, "db_now"), ())[0])


# ---- what is kept per connection: the database clock's offset, MySQL's id step and shards

#: Per caller's connection (when it takes a weak reference; sqlite3's does not, and is asked
#: each time, in process): the offset of the database's clock from this machine's, when it was
#: measured, MySQL's id step and shard counts.
_KEPT: "weakref.WeakKeyDictionary[Any, dict[str, Any]]" = weakref.WeakKeyDictionary()


def _kept(conn: Any) -> dict[str, Any]:
    try:
        return _KEPT.setdefault(conn, {})
    except TypeError:
        return {}


def _local_us() -> int:
    return time.time_ns() // 1000


def _now_on(conn: Any, flavor: str, kept: dict[str, Any]) -> int:
    """The database's now: this machine's clock plus the offset measured on `conn` within the
    last minute, else measured now (one round trip)."""
    clock = kept.get("clock")
    if clock is not None and time.monotonic() - clock[1] < 60:
        return _local_us() + int(clock[0])
    before = _local_us()
    now = db_now_us(conn, flavor)
    kept["clock"] = (now - (before + _local_us()) // 2, time.monotonic())
    return now


def _id_step(conn: Any, kept: dict[str, Any]) -> Optional[int]:
    """MySQL: how far apart one statement's ids are, or None when they need not be consecutive
    (auto-increment lock mode 2: the marker statements find them)."""
    if "step" not in kept:
        mode, every = _one(conn, statement("mysql", "db_autoinc"), ())
        kept["step"] = int(every) if int(mode) in (0, 1) else None
    step: Optional[int] = kept["step"]
    return step


def _shards(conn: Any, kept: dict[str, Any], queue: str) -> int:
    """MySQL: the shards of a queue's claim point (the client picks each job's), for 5 s."""
    known = kept.setdefault("shards", {})
    got = known.get(queue)
    if got is not None and time.monotonic() - got[1] < 5:
        return int(got[0])
    n = max(1, int(_one(conn, statement("mysql", "queue_shards"), (queue,))[0]))
    known[queue] = (n, time.monotonic())
    return n


@contextlib.contextmanager
def _whole(conn: Any, flavor: str) -> Iterator[None]:
    """A transaction of its own around a batch of several statements when `conn` is in
    autocommit mode with none open; else nothing: the batch runs in the caller's transaction
    (which the driver opens at the first write if it is not open yet)."""
    if flavor == "sqlite":
        own = conn.isolation_level is None and not conn.in_transaction
    elif flavor == "postgres":
        own = bool(conn.autocommit) and conn.info.transaction_status == 0  # IDLE
    else:
        own = bool(conn.get_autocommit()) and not conn.server_status & 1  # IN_TRANS
    if not own:
        yield
        return
    _execute(conn, "BEGIN IMMEDIATE" if flavor == "sqlite" else "BEGIN", ()).close()
    try:
        yield
    except BaseException:
        _execute(conn, "ROLLBACK", ()).close()
        raise
    _execute(conn, "COMMIT", ()).close()


# ---- the statements

def _plain(conn: Any, flavor: str, kept: dict[str, Any], chunk: Sequence[_Row],
           now: int) -> Optional[list[int]]:
    """Inserts jobs without unique keys (job_insert_uniform, job_insert_plain): their ids in
    order, or None on MySQL in interleaved auto-increment mode (use `_keyed`)."""
    first = chunk[0]
    at = first.due(now)
    if len(chunk) > 1 and flavor != "mysql" and all(
            j.queue == first.queue and j.kind == first.kind and j.priority == first.priority
            and j.max_attempts == first.max_attempts and j.trace == first.trace
            and j.due(now) == at for j in chunk):
        # The usual batch (one queue, kind, priority and time): the shared values bound once,
        # the payloads as one array.
        payloads = [j.payload for j in chunk]
        if flavor == "postgres":
            got = _one(conn, statement(flavor, "job_insert_uniform"), pg_params(
                first.queue, first.kind, first.priority, at, first.max_attempts, now,
                _pg_array(payloads), first.trace))
            return [int(i) for i in got[0]]
        cur = _execute(conn, statement(flavor, "job_insert_uniform"), (
            first.queue, first.kind, first.priority, at, first.max_attempts, now,
            json.dumps(payloads), first.trace))
        last = int(cur.lastrowid)
        cur.close()
        return list(range(last - len(chunk) + 1, last + 1))
    if flavor == "postgres":
        columns = _pg_columns(j.values(now) for j in chunk)
        got = _one(conn, statement(flavor, "job_insert_plain"), pg_params(*columns, now))
        return [int(i) for i in got[0]]
    if flavor == "sqlite":
        flat = [v for j in chunk for v in (*j.values(now), now)]
        cur = _execute(conn, statement(flavor, "job_insert_plain", rows=len(chunk), width=8), flat)
        last = int(cur.lastrowid)
        cur.close()
        return list(range(last - len(chunk) + 1, last + 1))
    # MySQL: a single row's id is the statement's own in any lock mode.
    step = 1 if len(chunk) == 1 else _id_step(conn, kept)
    if step is None:
        return None
    flat = [v for j in chunk for v in (*j.values(now), now,
                                       random.randrange(_shards(conn, kept, j.queue)))]
    cur = _execute(conn, statement(flavor, "job_insert_plain", rows=len(chunk), width=9), flat)
    first_id = int(cur.lastrowid)
    cur.close()
    return [first_id + i * step for i in range(len(chunk))]


def _pg_array(values: Iterable[Any]) -> str:
    """A PostgreSQL array literal of strings or integers (None: NULL), bound as one text value
    that the statement casts (`$1::text[]`, `$4::smallint[]`): built here with two C-level
    replaces an element, where psycopg's own list dumper (pure Python in Debian's build) spent
    more than the INSERT on escaping 1,000 payloads."""
    out = []
    for v in values:
        if v is None:
            out.append("NULL")
        elif isinstance(v, str):
            out.append('"' + v.replace("\\", "\\\\").replace('"', '\\"') + '"')
        else:
            out.append(str(int(v)))
    return "{" + ",".join(out) + "}"


def _pg_columns(rows: Iterable[Sequence[Any]]) -> list[str]:
    """The columns of rows, each as an array literal (`_pg_array`)."""
    return [_pg_array(c) for c in zip(*rows)]


def _slot(queue: str, key: str) -> tuple[str, str]:
    return (queue, key)


def _keyed(conn: Any, flavor: str, kept: dict[str, Any], chunk: Sequence[_Row],
           now: int) -> list[Optional[int]]:
    """Inserts jobs, some with unique keys (job_insert): for each, its new id, or None when its
    key was taken. Keys must be distinct within `chunk`."""
    created: list[tuple[int, Optional[tuple[str, str]]]]
    if flavor == "postgres":
        columns = _pg_columns((*j.values(now), j.unique_key) for j in chunk)
        cur = _execute(conn, statement(flavor, "job_insert"), pg_params(*columns, now))
        created = [(int(r[0]), None if r[2] is None else _slot(r[1], r[2]))
                   for r in cur.fetchall()]
        cur.close()
    elif flavor == "sqlite":
        flat = [v for j in chunk for v in (*j.values(now), j.unique_key, now)]
        cur = _execute(conn, statement(flavor, "job_insert", rows=len(chunk), width=9), flat)
        created = [(int(r[0]), None if r[2] is None else _slot(r[1], r[2]))
                   for r in cur.fetchall()]
        cur.close()
    else:
        # No RETURNING: a marker in lease_token finds the rows this statement created.
        marker = new_token()
        flat = [v for j in chunk for v in (*j.values(now), j.unique_key, now, marker,
                                           random.randrange(_shards(conn, kept, j.queue)))]
        cur = _execute(conn, statement(flavor, "job_insert", rows=len(chunk), width=11), flat)
        first_id, affected = int(cur.lastrowid), cur.rowcount
        cur.close()
        created = []
        if affected > 0:
            cur = _execute(conn, statement(flavor, "job_insert_created"), (first_id, marker))
            created = [(int(r[0]), None if r[2] is None else _slot(r[1], r[2]))
                       for r in cur.fetchall()]
            cur.close()
            if created:
                _execute(conn, statement(flavor, "job_insert_unmark", ids=len(created)),
                         [c[0] for c in created]).close()
    # Ids follow input order (one statement, rows in order, one sequence).
    created.sort(key=lambda c: c[0])
    made = {c[1] for c in created if c[1] is not None}
    out: list[Optional[int]] = []
    it = iter(created)
    for j in chunk:
        if j.unique_key is not None and _slot(j.queue, j.unique_key) not in made:
            out.append(None)
        else:
            out.append(next(it)[0])
    return out


def _holder(conn: Any, flavor: str, queue: str, key: str) -> Optional[int]:
    """The unfinished job of `queue` holding unique key `key` (job_find_unique.sql)."""
    params: Sequence[Any] | Mapping[str, Any] = (queue, key)
    if flavor == "postgres":
        params = pg_params(queue, key)
    found = _one(conn, statement(flavor, "job_find_unique"), params)
    return None if found is None else int(found[0])


def _group_set(conn: Any, flavor: str, jobs: Sequence[tuple[int, str]]) -> None:
    """Puts just-created jobs (id, group) in their ordered groups: waiting (job_group_set)."""
    if not jobs:
        return
    if flavor == "postgres":
        _execute(conn, statement(flavor, "job_group_set"),
                 pg_params([j[0] for j in jobs], [j[1] for j in jobs])).close()
        return
    for id_, group in jobs:
        _execute(conn, statement(flavor, "job_group_set"), (group, id_)).close()


def insert(conn: Any, jobs: Sequence[_Row], *, flavor: Optional[str] = None,
           now_us: Optional[Callable[[], int]] = None) -> list[int]:
    """Inserts checked jobs on `conn` in order, in its current transaction, and returns their ids
    (for a unique key already held by an unfinished job of the queue, that job's id). Never
    commits (on a connection in autocommit mode, a batch of several statements runs in a
    transaction of its own). `now_us`: the database's time (default: this machine's clock plus
    the database's offset, measured on `conn` once a minute)."""
    if not jobs:
        return []
    flavor = flavor or flavor_of(conn)
    kept = _kept(conn)
    now = now_us() if now_us is not None else _now_on(conn, flavor, kept)
    if one_statement(jobs, flavor):
        got = _plain(conn, flavor, kept, jobs, now)
        assert got is not None
        return got
    with _whole(conn, flavor):
        return _insert_all(conn, flavor, kept, jobs, now)


def _insert_all(conn: Any, flavor: str, kept: dict[str, Any], jobs: Sequence[_Row],
                now: int) -> list[int]:
    # Repeated unique keys folded into their first job (as the library's Deduped): the others
    # get its id.
    distinct: list[_Row] = []
    index: list[int] = []
    first: dict[tuple[str, str], int] = {}
    for j in jobs:
        if j.unique_key is None:
            index.append(len(distinct))
            distinct.append(j)
            continue
        slot = _slot(j.queue, j.unique_key)
        if slot not in first:
            first[slot] = len(distinct)
            distinct.append(j)
        index.append(first[slot])
    ids: list[int] = []
    grouped: list[tuple[int, str]] = []
    for at in range(0, len(distinct), INSERT_CHUNK):
        chunk = distinct[at:at + INSERT_CHUNK]
        got: Optional[list[int]] = None
        if all(j.unique_key is None for j in chunk):
            got = _plain(conn, flavor, kept, chunk, now)
        if got is not None:
            made: list[Optional[int]] = list(got)
            created = [True] * len(chunk)
        else:
            made = _keyed(conn, flavor, kept, chunk, now)
            created = [m is not None for m in made]
            for i, j in enumerate(chunk):
                # Taken: the holder is the job already there. None: it finished in between, and
                # the key is free again, so insert again.
                for _ in range(3):
                    if made[i] is not None:
                        break
                    assert j.unique_key is not None
                    made[i] = _holder(conn, flavor, j.queue, j.unique_key)
                    if made[i] is None:
                        made[i] = _keyed(conn, flavor, kept, [j], now)[0]
                        created[i] = made[i] is not None
                if made[i] is None:
                    raise RuntimeError(
                        f"unique key {j.unique_key!r}: no holder after three inserts")
        for j, m, c in zip(chunk, made, created):
            assert m is not None
            ids.append(m)
            if c and j.group is not None:
                grouped.append((m, j.group))
    # Grouped jobs wait for their group's turn (a job that already held its key keeps its state).
    _group_set(conn, flavor, grouped)
    return [ids[i] for i in index]


def enqueue(conn: Any, queue: str, payload: Any, *, priority: Optional[int] = None,
            run_at: Optional[check.Instant] = None, delay: Optional[check.Delay] = None,
            max_attempts: Optional[int] = None, unique_key: Optional[str] = None,
            kind: Optional[str] = None, group: Optional[str] = None,
            trace_context: Optional[check.TraceContext] = None) -> int:
    """Enqueues one job with the catalog's INSERT (docs/sql.md) on `conn`, a DB-API connection you
    own (sqlite3, psycopg 3 or PyMySQL), inside the transaction you have open: the job exists
    exactly when your transaction commits, and is gone if it rolls back. Never commits. Returns
    the job's id.

    `payload`: any value `json.dumps` takes. `priority`: −32768..32767, lower first (default 0).
    `run_at`: µs since the epoch or an aware datetime; or `delay`: seconds or a timedelta from
    the database's now. `max_attempts`: the job's own limit (default: the queue's). `unique_key`:
    while an unfinished job of the queue holds it, no new job is made and that job's id is
    returned. `kind`: the handler's name. `group`: an ordered group (the job is inserted
    `waiting`, and a backlog worker's leader promotes it in turn). `trace_context`: a W3C
    traceparent, or {"traceparent": …, "tracestate": …}.

    Raises InvalidPayload, InvalidName or InvalidOption, before anything is written."""
    job = row(queue, payload, priority=priority, run_at=run_at, delay=delay,
              max_attempts=max_attempts, unique_key=unique_key, kind=kind, group=group,
              trace_context=trace_context)
    return insert(conn, [job])[0]


def enqueue_many(conn: Any, jobs: Iterable[Mapping[str, Any]]) -> list[int]:
    """Enqueues jobs as `enqueue` does, on `conn`, in its current transaction: each a mapping
    with `queue`, `payload` and any of `enqueue`'s options. Every job is checked before the first
    is written; they go in as one statement per 1,000 jobs. Returns their ids, in order."""
    return insert(conn, rows(jobs))
