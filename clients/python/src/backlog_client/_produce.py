"""The producer of the SQL contract (docs/sql.md, "Enqueue from any language"): the plain INSERT
on a DB-API connection the caller owns, inside whatever transaction the caller has open, never
committing, so a job exists exactly when the caller's own rows commit."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Iterable, Mapping, Optional, Sequence

from . import _validate as check
from ._dialect import flavor_of, pg_params, statement
from .errors import InvalidOption

#: What a unique key conflicts with: the unique index's own condition, word for word (SQLite
#: matches it by text; docs/sql.md "Unique keys").
_ON_CONFLICT = (
    " ON CONFLICT (queue, unique_key) WHERE unique_key IS NOT NULL"
    " AND state IN ('available', 'running', 'held', 'waiting') DO NOTHING"
)
#: The options of one job, besides its queue and payload.
OPTIONS = ("priority", "run_at", "delay", "max_attempts", "unique_key", "kind", "group",
           "trace_context")


@dataclass
class _Row:
    """One job's INSERT, checked: its columns and their values, in order; `delay_us` is added to
    the database's time into `run_at` just before the INSERT."""

    names: list[str]
    values: list[Any]
    unique_key: Optional[str]
    delay_us: Optional[int]


def row(queue: str, payload: Any, *, priority: Optional[int] = None,
        run_at: Optional[check.Instant] = None, delay: Optional[check.Delay] = None,
        max_attempts: Optional[int] = None, unique_key: Optional[str] = None,
        kind: Optional[str] = None, group: Optional[str] = None,
        trace_context: Optional[check.TraceContext] = None) -> _Row:
    """Checks one job's values (raising a BacklogError before anything is written) and makes
    its INSERT's columns."""
    names = ["queue", "payload"]
    values: list[Any] = [check.name("queue name", queue), check.payload(payload)]

    def add(column: str, value: Any) -> None:
        names.append(column)
        values.append(value)

    if kind is not None:
        add("kind", check.name("kind", kind))
    if priority is not None:
        add("priority", check.priority(priority))
    if run_at is not None and delay is not None:
        raise InvalidOption("give run_at or delay, not both")
    if run_at is not None:
        add("run_at", check.instant_us(run_at))
    delay_us = None if delay is None else check.delay_us(delay)
    if max_attempts is not None:
        add("max_attempts", check.max_attempts(max_attempts))
    if unique_key is not None:
        add("unique_key", check.key("unique key", unique_key))
    if trace_context is not None:
        add("trace_context", check.trace_context(trace_context))
    if group is not None:
        # A grouped job waits for its group's turn: inserted `waiting`, never `available`
        # (docs/sql.md "Ordered groups").
        add("group_key", check.key("group key", group))
        add("state", "waiting")
    return _Row(names, values, unique_key, delay_us)


def rows(jobs: Iterable[Mapping[str, Any]]) -> list[_Row]:
    """Checks every job of a batch before any is written: each a mapping with `queue`,
    `payload` and any of OPTIONS."""
    out = []
    for i, job in enumerate(jobs):
        if not isinstance(job, Mapping):
            raise InvalidOption(f"job {i}: expected a mapping with queue and payload, not {job!r}")
        unknown = set(job) - {"queue", "payload", *OPTIONS}
        if unknown:
            raise InvalidOption(f"job {i}: unknown options {sorted(unknown)}")
        if "queue" not in job or "payload" not in job:
            raise InvalidOption(f"job {i}: queue and payload are required")
        out.append(row(**job))
    return out


def _execute(conn: Any, sql: str, params: Sequence[Any] | Mapping[str, Any]) -> Any:
    cur = conn.cursor()
    cur.execute(sql, params)
    return cur


def db_now_us(conn: Any, flavor: str) -> int:
    """The database's clock, as the "now" column defaults read it (db_now.sql)."""
    cur = _execute(conn, statement(flavor, "db_now"), ())
    try:
        return int(cur.fetchone()[0])
    finally:
        cur.close()


def _holder(conn: Any, flavor: str, queue: str, key: str) -> Optional[int]:
    """The unfinished job of `queue` holding unique key `key` (job_find_unique.sql)."""
    params: Sequence[Any] | Mapping[str, Any] = (queue, key)
    if flavor == "postgres":
        params = pg_params(queue, key)
    cur = _execute(conn, statement(flavor, "job_find_unique"), params)
    try:
        found = cur.fetchone()
        return None if found is None else int(found[0])
    finally:
        cur.close()


def _insert_one(conn: Any, flavor: str, job: _Row) -> Optional[int]:
    """Runs one INSERT; returns the new id, or None when the unique key was taken (SQLite,
    PostgreSQL; on MySQL the caller asks for the key's holder either way)."""
    mark = "?" if flavor == "sqlite" else "%s"
    marks = [mark if n != "payload" or flavor != "postgres" else "%s::jsonb" for n in job.names]
    # docs/sql.md: on PostgreSQL a payload bound as text needs the cast.
    sql = f"INSERT INTO backlog_job ({', '.join(job.names)}) VALUES ({', '.join(marks)})"
    if job.unique_key is not None:
        # "Enqueue unless already queued", as the library does: a taken key inserts nothing
        # (MySQL: not INSERT IGNORE, which would also swallow other errors).
        sql += " ON DUPLICATE KEY UPDATE id = id" if flavor == "mysql" else _ON_CONFLICT
    if flavor != "mysql":
        sql += " RETURNING id"
    cur = _execute(conn, sql, job.values)
    try:
        if flavor == "mysql":
            return int(cur.lastrowid) if cur.rowcount == 1 else None
        found = cur.fetchone()
        return None if found is None else int(found[0])
    finally:
        cur.close()


def insert(conn: Any, jobs: Sequence[_Row], *, flavor: Optional[str] = None,
           now_us: Optional[Callable[[], int]] = None) -> list[int]:
    """Inserts checked jobs on `conn` in order, in its current transaction, and returns their ids
    (for a unique key already held by an unfinished job of the queue, that job's id). Never
    commits. `now_us`: the database's time, for delays (default: asked of the database)."""
    flavor = flavor or flavor_of(conn)
    now: Optional[int] = None
    ids = []
    for job in jobs:
        names, values = list(job.names), list(job.values)
        if job.delay_us is not None:
            if now is None:
                now = now_us() if now_us is not None else db_now_us(conn, flavor)
            names.append("run_at")
            values.append(now + job.delay_us)
        full = _Row(names, values, job.unique_key, None)
        for _ in range(3):
            new = _insert_one(conn, flavor, full)
            if job.unique_key is None:
                assert new is not None
                ids.append(new)
                break
            if new is not None and flavor != "mysql":
                ids.append(new)
                break
            # Taken (or, on MySQL, either): the holder is the new job or the one already there.
            # None: the holder finished in between; the key is free again, so insert again.
            held = _holder(conn, flavor, str(job.values[0]), job.unique_key)
            if held is not None:
                ids.append(held)
                break
        else:
            raise RuntimeError(f"unique key {job.unique_key!r}: no holder after three inserts")
    return ids


def enqueue(conn: Any, queue: str, payload: Any, *, priority: Optional[int] = None,
            run_at: Optional[check.Instant] = None, delay: Optional[check.Delay] = None,
            max_attempts: Optional[int] = None, unique_key: Optional[str] = None,
            kind: Optional[str] = None, group: Optional[str] = None,
            trace_context: Optional[check.TraceContext] = None) -> int:
    """Enqueues one job with the plain INSERT of docs/sql.md on `conn`, a DB-API connection you
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
    is written. Returns their ids, in order."""
    return insert(conn, rows(jobs))
