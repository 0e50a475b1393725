"""A consumer: claims batches of one queue, runs a handler for each job, renews the leases of
the jobs it holds from a thread of its own, and reports each outcome, fenced by the lease."""

from __future__ import annotations

import sys
import threading
import time
from typing import Any, Callable, Optional, Sequence

from ._client import RESCUE_EVERY_S, Client
from ._job import Job, Retry, default_owner


class HeldLeases(threading.Thread):
    """A thread that renews the leases of the jobs a consumer holds, every third of the lease:
    the jobs held (`hold`, `drop`), its stop, and the error that ended it. Subclasses renew."""

    def __init__(self, name: str) -> None:
        super().__init__(daemon=True, name=name)
        self.held: dict[int, Job] = {}
        self.lock = threading.Lock()
        self.stop = threading.Event()
        self.error: Optional[BaseException] = None

    def hold(self, jobs: Sequence[Job]) -> None:
        with self.lock:
            self.held.update((j.id, j) for j in jobs)

    def drop(self, job: Job) -> None:
        with self.lock:
            self.held.pop(job.id, None)

    def jobs(self) -> list[Job]:
        """The jobs held now."""
        with self.lock:
            return list(self.held.values())


class _Heartbeats(HeldLeases):
    """Extends the leases of the jobs a consumer holds, every third of the lease, on its own
    connection, so a long job (or one waiting its turn in a batch) keeps its lease."""

    def __init__(self, url: str, lease_ms: int) -> None:
        super().__init__("backlog-heartbeats")
        self.url, self.lease_ms = url, lease_ms

    def run(self) -> None:
        try:
            client = Client(self.url)  # opened here: an sqlite3 connection stays in its thread
        except BaseException as err:
            self.error = err
            return
        try:
            while not self.stop.wait(self.lease_ms / 3000):
                for job in self.jobs():
                    if not client.heartbeat(job, lease_ms=self.lease_ms):
                        self.drop(job)
        except BaseException as err:  # the consumer stops when its heartbeats cannot run
            self.error = err
        finally:
            client.close()


Outcome = str  # 'completed', 'retry', 'dead', 'cancelled' or 'lost'
#: Longest a finished job waits for the rest of its batch before its completion is sent.
COMPLETE_WAIT_S = 0.05


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
        self.on_outcome: Callable[[Job, Outcome], None] = on_outcome or (lambda job, outcome: None)
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
        # Jobs whose handler returned, completed together: with the next claim (on PostgreSQL
        # one statement does both), or before the next job of the batch once the first of them
        # has waited COMPLETE_WAIT_S, or when the consumer stops. Their leases are renewed
        # until then.
        finished: list[Job] = []
        try:
            while not self.stop.is_set():
                if beats.error is not None:
                    raise RuntimeError("heartbeats failed") from beats.error
                if time.monotonic() - refreshed > 5:
                    settings, refreshed = self.client.queue_settings(self.queue), time.monotonic()
                self._rescue_now_and_then()
                done, jobs = self.client.ack_and_claim(
                    finished, self.queue, self.batch, owner=self.owner, lease_ms=lease_ms,
                    kinds=self.kinds, settings=settings)
                self._report(finished, done, beats)
                if not jobs:
                    if drain and self.client.pending(self.queue) == 0:
                        break
                    self.stop.wait(idle)
                    idle = min(idle * 2, self.poll_max_s)
                    continue
                idle = 0.05
                beats.hold(jobs)
                since = 0.0
                for i, job in enumerate(jobs):
                    if self.stop.is_set():
                        for rest in jobs[i:]:
                            beats.drop(rest)
                            self.client.release(rest)
                        break
                    if finished and time.monotonic() - since >= COMPLETE_WAIT_S:
                        self._complete(finished, settings, beats)
                    if self._run_one(job, settings):
                        if not finished:
                            since = time.monotonic()
                        finished.append(job)
                    else:
                        beats.drop(job)
            self._complete(finished, settings, beats)
        finally:
            beats.stop.set()
            beats.join()

    def _complete(self, finished: list[Job], settings: dict[str, Any],
                  beats: HeldLeases) -> None:
        """Completes the jobs whose handler returned, in one statement, and reports each."""
        if finished:
            self._report(finished, self.client.ack_many(finished, retention=settings["retention"]),
                         beats)

    def _report(self, finished: list[Job], done: set[int], beats: HeldLeases) -> None:
        """Reports the outcome of completed jobs (`done`: the ids whose lease held)."""
        for job in finished:
            beats.drop(job)
            self.on_outcome(job, "completed" if job.id in done else "lost")
        finished.clear()

    def _rescue_now_and_then(self) -> None:
        # Rescue before claiming, at most once a second, as the library does: with no Rust
        # process alongside, nobody else would recover a crashed worker's jobs.
        if time.monotonic() - self._last_rescue >= RESCUE_EVERY_S:
            self._last_rescue = time.monotonic()
            self.client.rescue()

    def _run_one(self, job: Job, settings: dict[str, Any]) -> bool:
        """Runs the handler; True when it returned and the job is to be completed (by
        `_complete`), False when its outcome was reported."""
        if job.lost:
            self.on_outcome(job, "lost")
            return False
        try:
            if not job.cancel_requested:
                self.handler(job)
        except Retry as r:
            retry_at = self.client.now_us() + int(r.delay_s * 1_000_000)
            outcome: Outcome = self.client.nack(job, str(r), retry_at=retry_at,
                                                settings=settings)
        except Exception as err:  # noqa: BLE001 - a failed attempt, recorded on the job
            outcome = self.client.nack(job, f"{type(err).__name__}: {err}", settings=settings)
        else:
            if job.cancel_requested:
                outcome = "cancelled" if self.client.cancelled(job) else "lost"
            else:
                return True
        self.on_outcome(job, outcome)
        return False
