"""The client: one connection to a queue database and the contract's operations on it
(docs/sql.md): enqueue, claim, ack, nack, heartbeat, release, rescue."""

from __future__ import annotations

import contextlib
import json
import os
import random
import time
from typing import Any, Callable, Iterable, Iterator, Mapping, Optional, Sequence, TypeVar

from . import _produce
from ._cursors import FULL_PASS, RESCUE_FLOOR, Cursors
from ._dialect import Key, _Sqlite, dialect_for
from ._job import Job, default_owner, new_token, now_us
from ._validate import Delay, Instant, TraceContext
from .errors import LeaseLost, SchemaMissing, SchemaTooOld

T = TypeVar("T")

#: The schema version this client speaks (docs/sql.md "Version"); its minor version follows it.
SCHEMA_VERSION = 20
#: How often a consumer runs the rescue of expired leases, at most (docs/sql.md "How often").
RESCUE_EVERY_S = 1.0
#: Most expired leases one rescue statement moves.
RESCUE_BATCH = 1000
#: Defaults of a queue without a row in backlog_queue (docs/sql.md, table backlog_queue).
QUEUE_DEFAULTS: dict[str, Any] = {
    "paused": False,
    "max_attempts": 25,
    "backoff_base_ms": 1000,
    "backoff_max_ms": 3_600_000,
    "lease_ms": 30_000,
    "ordering": "fifo",
    "retention": "keep",
}


def _held(held: bool, strict: bool, job: Job, operation: str) -> bool:
    if not held and strict:
        raise LeaseLost(job.id, operation)
    return held


def connect(url: str) -> Client:
    """Opens one connection to the queue database the URL names and checks its schema: raises
    SchemaMissing when it has no backlog schema, SchemaTooOld below SCHEMA_VERSION."""
    return Client(url)


class Client:
    """One connection and the contract's operations on it. Not shared between threads: give each
    thread its own (`Client(url)`), as the Consumer does for its heartbeats."""

    def __init__(self, url: str, *, check_schema: bool = True) -> None:
        self.url = url
        self.cursors = Cursors()
        self.dialect = dialect_for(url)
        if isinstance(self.dialect, _Sqlite) and not os.path.exists(self.dialect.path):
            # sqlite3 would create an empty file: there is no schema there.
            raise SchemaMissing(
                f"{self.dialect.path}: no such database file (run `backlog migrate`)")
        self.conn: Any = self.dialect.connect()
        self._in_transaction = False
        self.offset_us, self._synced = 0, time.monotonic()
        try:
            if check_schema:
                self.schema_version()
            self.sync_clock()
        except BaseException:
            self.conn.close()
            raise

    def schema_version(self) -> int:
        """The schema version of the database (the last migration `backlog migrate` applied).
        Raises SchemaMissing when it has no backlog schema, SchemaTooOld below SCHEMA_VERSION."""
        cur = self.conn.cursor()
        try:
            cur.execute(self.dialect.sql("schema_version"))
            version = int(cur.fetchone()[0])
        except Exception as err:
            if self.dialect.schema_missing(err):
                raise SchemaMissing(
                    "the database has no backlog schema (run `backlog migrate`)") from None
            raise
        finally:
            cur.close()
        if version == 0:
            raise SchemaMissing("the database has no backlog schema (run `backlog migrate`)")
        if version < SCHEMA_VERSION:
            raise SchemaTooOld(version, SCHEMA_VERSION)
        return version

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Closes the connection."""
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

    def _retrying(self, op: Callable[[], T]) -> T:
        """Runs `op` again when the database rolled it back as a deadlock victim (it changed
        nothing), as the library does. Not inside a caller's transaction, which is rolled back."""
        for attempt in range(10):
            try:
                return op()
            except Exception as err:  # noqa: BLE001 - re-raised unless transient
                if self._in_transaction or not self.dialect.transient(err) or attempt == 9:
                    raise
                time.sleep(random.uniform(0.001, 0.01) * (attempt + 1))
        raise AssertionError("unreachable")

    # ---- producing

    def enqueue(self, queue: str, payload: Any, *, priority: Optional[int] = None,
                run_at: Optional[Instant] = None, delay: Optional[Delay] = None,
                max_attempts: Optional[int] = None, unique_key: Optional[str] = None,
                kind: Optional[str] = None, group: Optional[str] = None,
                trace_context: Optional[TraceContext] = None) -> int:
        """Enqueues one job with the plain INSERT of docs/sql.md and returns its id, with the
        options of the module's `enqueue`. Outside `transaction()` it commits at once; inside, it
        exists exactly when the transaction commits."""
        job = _produce.row(queue, payload, priority=priority, run_at=run_at, delay=delay,
                           max_attempts=max_attempts, unique_key=unique_key, kind=kind,
                           group=group, trace_context=trace_context)
        return self._insert([job])[0]

    def enqueue_many(self, jobs: Iterable[Mapping[str, Any]]) -> list[int]:
        """Enqueues jobs (mappings with `queue`, `payload` and options) in one transaction (or
        in the one open), all or none, each checked before the first is written."""
        return self._insert(_produce.rows(jobs))

    def _insert(self, jobs: list[_produce._Row]) -> list[int]:
        def run() -> list[int]:
            return _produce.insert(self.conn, jobs, flavor=self.dialect.name, now_us=self.now_us)

        if self._in_transaction or _produce.one_statement(jobs, self.dialect.name):
            return self._retrying(run)

        def all_or_none() -> list[int]:
            with self.transaction():
                return run()

        return self._retrying(all_or_none)

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
              settings: Optional[dict[str, Any]] = None) -> list[Job]:
        """Claims up to `limit` due jobs of `queue` with the claim statement of the dialect,
        under one fresh lease token. `kinds`: only jobs of these kinds (None: any)."""
        return self.ack_and_claim([], queue, limit, owner=owner, lease_ms=lease_ms, kinds=kinds,
                                  settings=settings)[1]

    def ack_and_claim(self, done: Sequence[Job], queue: str, limit: int, *,
                      owner: Optional[str] = None, lease_ms: Optional[int] = None,
                      kinds: Optional[Sequence[str]] = None,
                      settings: Optional[dict[str, Any]] = None) -> tuple[set[int], list[Job]]:
        """Completes `done` (jobs of `queue`, as `ack_many`) and claims up to `limit` more, as
        `claim`: on PostgreSQL in one statement and one commit
        (job_complete_then_claim_{keep,delete}), elsewhere (and for archive) one after the other.
        Returns the ids completed and the jobs claimed."""
        settings = settings or self.queue_settings(queue)
        lease_us = (lease_ms or settings["lease_ms"]) * 1000
        token, now = new_token(), self.now_us()
        expires = now + lease_us
        order = settings["ordering"]
        retention = str(settings["retention"])
        cursors_key = (queue, tuple(kinds or ()))
        after, started = self.cursors.plan(cursors_key), time.monotonic()
        who = owner or default_owner()
        cursors = {} if after is None else after
        both_at_once = bool(done) and self.dialect.name == "postgres" and retention != "archive"
        completed: set[int] = set()
        if done and not both_at_once:
            completed = self.ack_many(done, retention=retention)

        def run() -> tuple[list[Any], list[tuple[int, Key]]]:
            nonlocal completed
            if both_at_once:
                both = self.dialect.complete_claim(self.conn, retention, done, now, queue, token,
                                                   who, expires, now, kinds, limit, order, cursors)
                assert both is not None
                completed = both[0]
                return both[1], both[2]
            return self.dialect.claim(self.conn, queue, token, who, expires, now, kinds, limit,
                                      order, cursors)

        rows, reached = self._retrying(run)
        if order == "fifo":
            self.cursors.record(cursors_key, after is None, time.monotonic() - started, reached)
        loads = json.loads
        jobs = [
            Job(id=r[0], queue=queue, kind=r[1], payload=loads(r[2]), priority=r[3],
                attempt=r[4], max_attempts=r[5], run_at=r[6], created_at=r[7], token=token,
                lease_expires_at=expires, trace_context=r[8], group=r[9])
            for r in rows
        ]
        # UPDATE … RETURNING gives rows in no particular order: claim order again.
        key = (lambda j: (j.priority, j.run_at, j.id)) if order == "fifo" else (
            lambda j: (j.priority, -j.run_at, -j.id))
        return completed, sorted(jobs, key=key)

    def ack(self, job: Job, *, retention: Optional[str] = None, strict: bool = False) -> bool:
        """Completes the job (what that does follows the queue's retention). True when it was
        completed; False when the lease was lost (the job was rescued and is someone else's, or
        is gone): nothing changed, and the job must not be reported again. With `strict`, a
        lost lease raises LeaseLost instead."""
        kept = retention or str(self.queue_settings(job.queue)["retention"])
        now = self.now_us()
        held = self._retrying(lambda: self.dialect.complete(self.conn, kept, job, now))
        return _held(held, strict, job, "ack")

    def ack_many(self, jobs: Sequence[Job], *, retention: Optional[str] = None) -> set[int]:
        """Completes jobs as `ack` does, one statement (or transaction) per queue and claim batch
        of up to 1,000: returns the ids completed; the others had lost their lease (nothing
        changed for them). `retention`: the same for every job (default: each queue's)."""
        done: set[int] = set()
        by_queue: dict[str, list[Job]] = {}
        for job in jobs:
            by_queue.setdefault(job.queue, []).append(job)
        now = self.now_us()
        for queue, some in by_queue.items():
            kept = retention or str(self.queue_settings(queue)["retention"])
            for at in range(0, len(some), 1000):
                part = some[at:at + 1000]
                done |= self._retrying(
                    lambda: self.dialect.complete_many(self.conn, kept, part, now))
        return done

    def nack(self, job: Job, error: str, *, retry_at: Optional[int] = None,
             settings: Optional[dict[str, Any]] = None, strict: bool = False) -> str:
        """Fails this attempt with `error`: a retry at `retry_at` (µs; default the queue's
        backoff), or dead when it was the last attempt. Returns 'retry', 'dead', or 'lost' (the
        lease was lost; nothing changed; with `strict`, LeaseLost is raised instead)."""
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
        if not _held(held, strict, job, "nack"):
            return "lost"
        return "dead" if state == "dead" else "retry"

    def cancelled(self, job: Job, reason: str = "cancelled", *, strict: bool = False) -> bool:
        """Answers a requested cancel: the fail statement with the state `cancelled`. False (or
        LeaseLost with `strict`) when the lease was lost."""
        now = self.now_us()
        held = self._retrying(lambda: self.dialect.fail(
            self.conn, job, "cancelled", now, now, now, reason))
        return _held(held, strict, job, "cancel")

    def heartbeat(self, job: Job, *, lease_ms: Optional[int] = None, strict: bool = False) -> bool:
        """Extends the job's lease to now + lease. False (or LeaseLost with `strict`) when the
        lease was lost: stop the job and report nothing. Sets `job.cancel_requested` when its
        cancellation was requested."""
        lease_us = int(lease_ms or self.queue_settings(job.queue)["lease_ms"]) * 1000
        expires = self.now_us() + lease_us
        held, cancel = self._retrying(lambda: self.dialect.heartbeat(self.conn, job, expires))
        if held:
            job.lease_expires_at = expires
            job.cancel_requested = job.cancel_requested or cancel
        else:
            job.lost = True
        return _held(held, strict, job, "heartbeat")

    def release(self, job: Job, run_at: Optional[int] = None, *, strict: bool = False) -> bool:
        """Gives the job back without using an attempt, to run again at `run_at` (default now).
        False (or LeaseLost with `strict`) when the lease was lost."""
        at = self.now_us() if run_at is None else run_at
        self.cursors.rewind()  # the job is available again where it was: behind the cursor
        held = self._retrying(lambda: self.dialect.release(self.conn, job, at))
        return _held(held, strict, job, "release")

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
        mark = "?" if self.dialect.name == "sqlite" else "%s"
        sql = ("SELECT COUNT(*) FROM backlog_job WHERE queue = "
               f"{mark} AND state IN ('available', 'running')")
        cur = self.conn.cursor()
        cur.execute(sql, (queue,))
        return int(cur.fetchone()[0])

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
        best: Optional[tuple[int, int]] = None
        for _ in range(3):
            before = now_us()
            cur = self.conn.cursor()
            cur.execute(self.dialect.sql("db_now"))
            db_now = int(cur.fetchone()[0])
            cur.close()
            after = now_us()
            if best is None or after - before < best[1]:
                best = (db_now - (before + after) // 2, after - before)
        assert best is not None
        self.offset_us = best[0]
        self._synced = time.monotonic()
        return self.offset_us


def backoff_us(attempt: int, settings: Mapping[str, Any]) -> int:
    """The retry delay after attempt `attempt`: min(base · 2^(attempt−1), max), then a uniformly
    random point between half of that and all of it (docs/sql.md "Nack")."""
    ms = min(settings["backoff_base_ms"] * 2 ** max(attempt - 1, 0), settings["backoff_max_ms"])
    return int(random.uniform(ms / 2, ms) * 1000)
